#include "ssm/ops/rms_norm.h"

#include <cmath>

#include "ssm/ops/activations.h"

namespace ssm::ops {
namespace {

// Accumulates in double: the row sums of long rows are where fp32 drifts.
float inv_rms(const float* x, int64_t n, float eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(n) + eps));
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out,
              ThreadPool& pool) {
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* o = out + r * dim;
      const float s = inv_rms(xr, dim, eps);
      for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * s * w[i];
    }
  });
}

void gated_rms_norm(const float* y, const float* z, int64_t ldz, const float* w, int64_t rows,
                    int64_t dim, int64_t group, float eps, bool norm_before_gate, float* out,
                    ThreadPool& pool) {
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* yr = y + r * dim;
      const float* zr = z + r * ldz;
      float* o = out + r * dim;
      if (!norm_before_gate)
        for (int64_t i = 0; i < dim; ++i) o[i] = yr[i] * silu(zr[i]);
      else if (o != yr)
        for (int64_t i = 0; i < dim; ++i) o[i] = yr[i];
      for (int64_t g0 = 0; g0 < dim; g0 += group) {
        const float s = inv_rms(o + g0, group, eps);
        for (int64_t i = g0; i < g0 + group; ++i) o[i] = o[i] * s * w[i];
      }
      if (norm_before_gate)
        for (int64_t i = 0; i < dim; ++i) o[i] *= silu(zr[i]);
    }
  });
}

}  // namespace ssm::ops
