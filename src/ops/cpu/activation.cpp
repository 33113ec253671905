// Pointwise activations, parallel over rows once a tensor pays for threads.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

void relu_squared(Context& ctx, const Tensor& t) {
  const ops::Rows<float> rows(t);
  const int64_t cols = t.cols();
  parallel_items(ctx.pool(), t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* v = rows[r];
      for (int64_t c = 0; c < cols; ++c) {
        const float p = std::max(0.f, v[c]);
        v[c] = p * p;
      }
    }
  });
}

void gelu_product(Context& ctx, const Tensor& gate, const Tensor& t) {
  const ops::Rows<float> g(gate), rows(t);
  const int64_t cols = t.cols();
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  parallel_items(ctx.pool(), t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* gr = g[r];
      float* v = rows[r];
      for (int64_t c = 0; c < cols; ++c) v[c] *= 0.5f * gr[c] * (1.f + std::erf(gr[c] * kInvSqrt2));
    }
  });
}

void relu_squared_backward(Context& ctx, const Tensor& x, const Tensor& d) {
  const ops::Rows<const float> xs(x);
  const ops::Rows<float> ds(d);
  const int64_t cols = x.cols();
  parallel_items(ctx.pool(), x.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) ds[r][c] *= 2.f * std::max(0.f, xs[r][c]);
  });
}

void gelu_product_backward(Context& ctx, const Tensor& gate, const Tensor& t, const Tensor& dgate,
                           const Tensor& d) {
  const ops::Rows<const float> g(gate), ts(t);
  const ops::Rows<float> dg(dgate), ds(d);
  const int64_t cols = t.cols();
  constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  parallel_items(ctx.pool(), t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float v = g[r][c], dout = ds[r][c], cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
        dg[r][c] = dout * ts[r][c] * (cdf + v * std::exp(-0.5f * v * v) * kInvSqrt2Pi);
        ds[r][c] = dout * v * cdf;
      }
  });
}

}  // namespace

void add_activation_kernels(OpTable& t) {
  t.relu_squared = &relu_squared;
  t.gelu_product = &gelu_product;
  t.relu_squared_backward = &relu_squared_backward;
  t.gelu_product_backward = &gelu_product_backward;
}

}  // namespace ssm::cpu
