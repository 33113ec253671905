// Backward of RMSNorm and of the gated grouped norm (see rms_norm.cpp). The
// weight gradient is summed per fixed block of rows, then over the blocks in
// order, so it does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "ops/cpu/rms_norm.h"
#include "ops/cpu/vec_backward.h"
#include "ops/cpu/vec_math.h"
#include "ops/cpu/worker_slots.h"
#include "ops/tensor_data.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

constexpr int64_t kRowBlock = 32;

// Per-block partial sums of dw (blocks x dim doubles), or undefined.
Tensor partial_sums(Context& ctx, const Tensor& dw, int64_t blocks, int64_t dim) {
  return dw.defined() ? ctx.arena().zeros(DType::kF64, {blocks, dim}) : Tensor();
}

// Adds the per-block partials (if any) to dw in block order.
void reduce_blocks(const Tensor& partial, int64_t blocks, int64_t dim, const Tensor& dw) {
  if (!partial.defined()) return;
  const double* p = partial.data<double>();
  float* out = elements<float>(dw);
  for (int64_t i = 0; i < dim; ++i) {
    double s = 0;
    for (int64_t b = 0; b < blocks; ++b) s += p[b * dim + i];
    out[i] += static_cast<float>(s);
  }
}

// One run of n channels normalised together: v the normed input, g the
// gradient of the output. Writes (or adds, when accumulating) dv and adds
// g v r to dwp (may be null).
void norm_group_backward(const float* v, const float* w, const float* g, int64_t n, float eps,
                         float* dv, bool accumulate, double* dwp) {
  double ss = 0, dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    ss += static_cast<double>(v[i]) * v[i];
    dot += static_cast<double>(v[i]) * w[i] * g[i];
  }
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  const double c = dot * r * r * r / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float d = static_cast<float>(r * w[i] * g[i] - v[i] * c);
    dv[i] = accumulate ? dv[i] + d : d;
    if (dwp) dwp[i] += static_cast<double>(g[i]) * v[i] * r;
  }
}

}  // namespace

void rms_norm_backward(Context& ctx, const ops::RmsNormBackwardArgs& a) {
  const int64_t rows = a.x.rows(), dim = a.x.cols();
  const int64_t ldx = a.x.row_stride(), ldg = a.dout.row_stride(), lddx = a.dx.row_stride();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const Tensor partial = partial_sums(ctx, a.dw, blocks, dim);
  ctx.pool().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r)
        norm_group_backward(a.x.data<float>() + r * ldx, a.w.data<float>(),
                            a.dout.data<float>() + r * ldg, dim, a.eps,
                            elements<float>(a.dx) + r * lddx, a.accumulate_dx,
                            partial.defined() ? elements<double>(partial) + b * dim : nullptr);
  });
  reduce_blocks(partial, blocks, dim, a.dw);
}

void gated_rms_norm_backward(Context& ctx, const ops::GatedRmsNormBackwardArgs& a) {
  const int64_t rows = a.y.rows(), dim = a.y.cols(), group = a.group ? a.group : dim;
  const int64_t ldy = a.y.row_stride(), ldz = a.z.row_stride(), ldg = a.dout.row_stride();
  const int64_t lddy = a.dy.row_stride(), lddz = a.dz.row_stride();
  const float* w = elements_or_null<float>(a.w);
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const Tensor partial = w ? partial_sums(ctx, a.dw, blocks, dim) : Tensor();
  // Per worker: the gated input v, its gradient dv and the norm's output gradient g.
  const Tensor scratch =
      ctx.arena().alloc(DType::kF32, {worker_slots(ctx.pool(), blocks), 3 * dim});
  parallel_for_slots(ctx.pool(), blocks, [&](int64_t slot, int64_t b0, int64_t b1) {
    float* v = elements<float>(scratch) + slot * 3 * dim;
    float* dv = v + dim;
    float* g = dv + dim;
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
        const float* y = a.y.data<float>() + r * ldy;
        const float* z = a.z.data<float>() + r * ldz;
        const float* dout = a.dout.data<float>() + r * ldg;
        float* dy = elements<float>(a.dy) + r * lddy;
        float* dz = elements<float>(a.dz) + r * lddz;
        double* dwp = partial.defined() ? elements<double>(partial) + b * dim : nullptr;
        if (!w) {  // out = y * silu(z)
          silu_gate_backward(y, z, dout, dy, dz, dim);
          continue;
        }
        if (!a.norm_before_gate) {
          // v = y * silu(z); out = norm(v) * w
          mul_silu(y, z, v, dim);
          for (int64_t g0 = 0; g0 < dim; g0 += group)
            norm_group_backward(v + g0, w + g0, dout + g0, group, a.eps, dv + g0, false,
                                dwp ? dwp + g0 : nullptr);
          silu_gate_backward(y, z, dv, dy, dz, dim);
          continue;
        }
        // out = norm(y) * w * silu(z)
        for (int64_t i = 0; i < dim; ++i) g[i] = dout[i] * ops::silu(z[i]);
        for (int64_t g0 = 0; g0 < dim; g0 += group) {
          double ss = 0;
          for (int64_t i = g0; i < g0 + group; ++i) ss += static_cast<double>(y[i]) * y[i];
          const double rr = 1.0 / std::sqrt(ss / static_cast<double>(group) + a.eps);
          for (int64_t i = g0; i < g0 + group; ++i)
            dz[i] = static_cast<float>(dout[i] * y[i] * rr * w[i] * ops::silu_grad(z[i]));
          norm_group_backward(y + g0, w + g0, g + g0, group, a.eps, dy + g0, false,
                              dwp ? dwp + g0 : nullptr);
        }
      }
  });
  reduce_blocks(partial, blocks, dim, a.dw);
}

}  // namespace ssm::cpu
