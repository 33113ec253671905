// RMSNorm and the gated grouped norm, a row per index of the pool. Sums of
// squares run in double: the row sums of long rows are where fp32 drifts.
// The backwards are in rms_norm_backward.cpp.
#include "ops/cpu/rms_norm.h"

#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/vec_math.h"
#include "ops/tensor_data.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

float inv_rms(const float* x, int64_t n, float eps) {
  const double s = sum_squares(x, n);
  return static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(n) + eps));
}

// out may alias x: each row's scale is found before the row is written.
void rms_norm(Context& ctx, const ops::RmsNormArgs& a) {
  const int64_t D = a.x.cols(), ldx = a.x.row_stride(), ldo = a.out.row_stride();
  const float* w = elements_or_null<float>(a.w);
  parallel_items(ctx.pool(), a.x.rows(), D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = a.x.data<float>() + r * ldx;
      float* o = elements<float>(a.out) + r * ldo;
      const float s = inv_rms(xr, D, a.eps);
      if (w)
        for (int64_t i = 0; i < D; ++i) o[i] = xr[i] * s * w[i];
      else  // the weightless norm (FalconMamba's of B, C and dt)
        for (int64_t i = 0; i < D; ++i) o[i] = xr[i] * s;
    }
  });
}

// Without w, the plain gate y * SiLU(z). out may alias y: it is built in
// place, element by element, from y.
void gated_rms_norm(Context& ctx, const ops::GatedRmsNormArgs& a) {
  const int64_t D = a.y.cols(), group = a.group ? a.group : D;
  const int64_t ldy = a.y.row_stride(), ldz = a.z.row_stride(), ldo = a.out.row_stride();
  const float* w = elements_or_null<float>(a.w);
  const bool gate_first = !w || !a.norm_before_gate;
  parallel_items(ctx.pool(), a.y.rows(), D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* yr = a.y.data<float>() + r * ldy;
      const float* zr = a.z.data<float>() + r * ldz;
      float* o = elements<float>(a.out) + r * ldo;
      if (gate_first)
        mul_silu(yr, zr, o, D);
      else if (o != yr)
        for (int64_t i = 0; i < D; ++i) o[i] = yr[i];
      if (!w) continue;
      for (int64_t g0 = 0; g0 < D; g0 += group) {
        const float s = inv_rms(o + g0, group, a.eps);
        for (int64_t i = g0; i < g0 + group; ++i) o[i] = o[i] * s * w[i];
      }
      if (a.norm_before_gate) mul_silu(o, zr, o, D);
    }
  });
}

}  // namespace

void add_norm_kernels(OpTable& t) {
  t.rms_norm = &rms_norm;
  t.rms_norm_backward = &rms_norm_backward;
  t.gated_rms_norm = &gated_rms_norm;
  t.gated_rms_norm_backward = &gated_rms_norm_backward;
}

}  // namespace ssm::cpu
