// dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max) and A = -exp(A_log)
// in float, as the layers computed them inline before, and their backward.
#include <algorithm>
#include <cmath>

#include "ops/cpu/parallel.h"
#include "ops/cpu/ssd.h"
#include "ops/tensor_data.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {

using ops::elements;
using ops::elements_or_null;

void ssd_prepare(Context& ctx, const ops::SsdPrepareArgs& a) {
  const int64_t H = a.dt_raw.cols(), ldr = a.dt_raw.row_stride(), ldt = a.dt.row_stride();
  const float* bias = a.dt_bias.data<float>();
  parallel_items(ctx.pool(), a.dt_raw.rows(), H, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* raw = a.dt_raw.data<float>() + r * ldr;
      float* dt = elements<float>(a.dt) + r * ldt;
      for (int64_t h = 0; h < H; ++h)
        dt[h] = std::clamp(ops::softplus(raw[h] + bias[h]), a.dt_min, a.dt_max);
    }
  });
  const float* A_log = a.A_log.data<float>();
  float* A = elements<float>(a.A);
  for (int64_t h = 0; h < H; ++h) A[h] = -std::exp(A_log[h]);
}

// ddt_bias sums the rows in order on the calling thread, so it does not
// depend on the thread count.
void ssd_prepare_backward(Context& ctx, const ops::SsdPrepareBackwardArgs& a) {
  const int64_t R = a.dt_raw.rows(), H = a.dt_raw.cols();
  const int64_t ldr = a.dt_raw.row_stride(), ldg = a.ddt.row_stride();
  const int64_t ldo = a.ddt_raw.row_stride();
  const float* bias = a.dt_bias.data<float>();
  float* ddt_raw = elements<float>(a.ddt_raw);
  ctx.pool().parallel_for(R, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* raw = a.dt_raw.data<float>() + r * ldr;
      const float* ddt = a.ddt.data<float>() + r * ldg;
      for (int64_t h = 0; h < H; ++h) {
        const float x = raw[h] + bias[h], sp = ops::softplus(x);
        // The clamp passes no gradient where it is active.
        const float pass = (sp >= a.dt_min && sp <= a.dt_max) ? ops::softplus_grad(x) : 0.f;
        ddt_raw[r * ldo + h] = ddt[h] * pass;
      }
    }
  });
  if (float* ddt_bias = elements_or_null<float>(a.ddt_bias))
    for (int64_t h = 0; h < H; ++h) {
      double s = 0;
      for (int64_t r = 0; r < R; ++r) s += ddt_raw[r * ldo + h];
      ddt_bias[h] += static_cast<float>(s);
    }
  if (float* dA_log = elements_or_null<float>(a.dA_log)) {
    const float* A_log = a.A_log.data<float>();
    const float* dA = a.dA.data<float>();
    for (int64_t h = 0; h < H; ++h) dA_log[h] += dA[h] * -std::exp(A_log[h]);  // dA/dA_log = A
  }
}

}  // namespace ssm::cpu
