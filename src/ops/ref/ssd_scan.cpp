#include <cmath>
#include <vector>

#include "ssm/ops/ssd_scan.h"

namespace ssm::ops {

void ssd_scan_reference(const SsdScanArgs& a) {
  const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, G = a.groups;
  std::vector<double> S(P * N);
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      float* st = a.state + (b * H + h) * P * N;
      for (int64_t i = 0; i < P * N; ++i) S[i] = st[i];
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t;
        const double dt = a.dt[row * a.ld_dt + h];
        const double decay = std::exp(dt * a.A[h]);
        const float* x = a.x + row * a.ld_x + h * P;
        const float* Bt = a.B + row * a.ld_bc + g * N;
        const float* Ct = a.C + row * a.ld_bc + g * N;
        float* y = a.y + row * a.ld_y + h * P;
        for (int64_t p = 0; p < P; ++p) {
          double acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            double& s = S[p * N + n];
            s = decay * s + dt * x[p] * Bt[n];
            acc += s * Ct[n];
          }
          y[p] = static_cast<float>(acc + (a.D ? a.D[h] * static_cast<double>(x[p]) : 0.0));
        }
      }
      for (int64_t i = 0; i < P * N; ++i) st[i] = static_cast<float>(S[i]);
    }
  }
}

}  // namespace ssm::ops
