// The Mamba-3 recurrence one step at a time (SPEC §4): the oracle for the
// chunked form and, since it allocates nothing, the decode path.
#include "ssm/ops/mamba3_scan.h"

#include <algorithm>
#include <cmath>

namespace ssm::ops {

void mamba3_scan_sequential(const Mamba3ScanArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.heads, [&a](int64_t i0, int64_t i1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, R = a.rank;
    for (int64_t i = i0; i < i1; ++i) {
      const float D = a.D ? a.D[i % H] : 0.f;
      float* S = a.ssm + i * P * N;
      float* k_prev = a.k_prev + i * R * N;
      float* v_prev = a.v_prev + i * R * P;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t;
        const float dt = a.dt[step], lam = a.lam[step];
        const float alpha = std::exp(a.A[step] * dt);
        const float beta = (1.f - lam) * dt * alpha, gamma = lam * dt;
        const float* q = a.q + step * R * N;
        const float* k = a.k + step * R * N;
        const float* v = a.v + step * R * P;
        float* o = a.o + step * R * P;
        for (int64_t p = 0; p < P; ++p) {
          float* s = S + p * N;
          for (int64_t n = 0; n < N; ++n) s[n] *= alpha;
          for (int64_t r = 0; r < R; ++r) {
            const float bv = beta * v_prev[r * P + p], gv = gamma * v[r * P + p];
            const float* kp = k_prev + r * N;
            const float* kt = k + r * N;
            for (int64_t n = 0; n < N; ++n) s[n] += bv * kp[n] + gv * kt[n];
          }
          for (int64_t r = 0; r < R; ++r) {
            const float* qr = q + r * N;
            float acc = 0.f;
            for (int64_t n = 0; n < N; ++n) acc += s[n] * qr[n];
            o[r * P + p] = acc + D * v[r * P + p];
          }
        }
        std::copy(k, k + R * N, k_prev);
        std::copy(v, v + R * P, v_prev);
      }
    }
  });
}

}  // namespace ssm::ops
