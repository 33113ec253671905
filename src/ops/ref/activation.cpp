// Pointwise activations, element by element in double.
#include <algorithm>
#include <cmath>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

void relu_squared(Context&, const Tensor& t) {
  const ops::Rows<float> rows(t);
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double v = std::max(0.0, static_cast<double>(rows[r][c]));
      rows[r][c] = static_cast<float>(v * v);
    }
}

void gelu_product(Context&, const Tensor& gate, const Tensor& t) {
  const ops::Rows<float> g(gate), rows(t);
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double v = g[r][c];
      const double gelu = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      rows[r][c] = static_cast<float>(gelu * rows[r][c]);
    }
}

void relu_squared_backward(Context&, const Tensor& x, const Tensor& d) {
  const ops::Rows<const float> xs(x);
  const ops::Rows<float> ds(d);
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t c = 0; c < x.cols(); ++c)
      ds[r][c] = static_cast<float>(2.0 * std::max(0.0, static_cast<double>(xs[r][c])) * ds[r][c]);
}

// GELU'(v) = Phi(v) + v phi(v), Phi and phi the normal distribution and density.
void gelu_product_backward(Context&, const Tensor& gate, const Tensor& t, const Tensor& dgate,
                           const Tensor& d) {
  const ops::Rows<const float> g(gate), ts(t);
  const ops::Rows<float> dg(dgate), ds(d);
  const double inv_sqrt_2pi = 0.39894228040143267794;
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double v = g[r][c], dout = ds[r][c];
      const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
      dg[r][c] = static_cast<float>(dout * ts[r][c] * (cdf + v * std::exp(-0.5 * v * v) * inv_sqrt_2pi));
      ds[r][c] = static_cast<float>(dout * v * cdf);
    }
}

}  // namespace

void add_activation_kernels(OpTable& t) {
  t.relu_squared = &relu_squared;
  t.gelu_product = &gelu_product;
  t.relu_squared_backward = &relu_squared_backward;
  t.gelu_product_backward = &gelu_product_backward;
}

}  // namespace ssm::ref
