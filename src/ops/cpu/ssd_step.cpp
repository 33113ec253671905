// The state is read and written once per step, so the loop is laid out for
// streaming: for each row p of S, one pass over n fuses the decay, the rank-1
// update and the dot product with C. Work is split over (batch row, head).
#include "ssm/ops/ssd_step.h"

#include <cmath>

namespace ssm::ops {
namespace {

void step_head(const SsdStepArgs& a, int64_t b, int64_t h) {
  const int64_t P = a.headdim, N = a.d_state, g = h / (a.heads / a.groups);
  const float dt = a.dt[b * a.ld_dt + h];
  const float decay = std::exp(dt * a.A[h]);
  const float d = a.D ? a.D[h] : 0.f;
  const float* x = a.x + b * a.ld_x + h * P;
  const float* __restrict Bn = a.B + b * a.ld_bc + g * N;
  const float* __restrict Cn = a.C + b * a.ld_bc + g * N;
  float* y = a.y + b * a.ld_y + h * P;
  float* S = a.state + (b * a.heads + h) * P * N;
  for (int64_t p = 0; p < P; ++p) {
    float* __restrict s = S + p * N;
    const float xdt = x[p] * dt;
    // Eight partial sums let the compiler vectorise the dot product without
    // reassociating it; the order is fixed, so results do not vary by run.
    float acc[8] = {};
    int64_t n = 0;
    for (; n + 8 <= N; n += 8)
      for (int64_t j = 0; j < 8; ++j) {
        s[n + j] = decay * s[n + j] + xdt * Bn[n + j];
        acc[j] += s[n + j] * Cn[n + j];
      }
    for (; n < N; ++n) {
      s[n] = decay * s[n] + xdt * Bn[n];
      acc[0] += s[n] * Cn[n];
    }
    y[p] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) +
           d * x[p];
  }
}

}  // namespace

void ssd_step(const SsdStepArgs& a, ThreadPool& pool) {
  // The lambda holds one pointer so that std::function keeps it inline.
  const SsdStepArgs* args = &a;
  pool.parallel_for(a.batch * a.heads, [args](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) step_head(*args, i / args->heads, i % args->heads);
  });
}

}  // namespace ssm::ops
