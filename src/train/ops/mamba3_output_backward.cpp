#include "ssm/train/ops/mamba3_output_backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ssm/train/ops/activations_backward.h"

namespace ssm::ops {

void mamba3_output_backward(const Mamba3OutputArgs& a, const Mamba3OutputGrads& g,
                            ThreadPool& pool) {
  pool.parallel_for(a.heads, [&](int64_t h0, int64_t h1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, R = a.rank;
    std::vector<double> dmz(R * P), dmo(R * P), dnorm(P), don(P);
    for (int64_t h = h0; h < h1; ++h) {
      std::fill(dmz.begin(), dmz.end(), 0.0);
      std::fill(dmo.begin(), dmo.end(), 0.0);
      std::fill(dnorm.begin(), dnorm.end(), 0.0);
      const float* w = a.norm ? a.norm + h * P : nullptr;
      for (int64_t row = 0; row < a.batch * L; ++row) {
        const int64_t b = row / L, t = row % L;
        const float* z = a.z + row * a.ld_z + h * P;
        const float* dy = g.dy + row * g.ld_dy + h * P;
        float* dz = g.dz + row * g.ld_dz + h * P;
        std::fill(dz, dz + P, 0.f);
        for (int64_t r = 0; r < R; ++r) {
          const int64_t at = (((b * H + h) * L + t) * R + r) * P, hr = (h * R + r) * P;
          const float* o = a.o + at;
          float* d_o = g.d_o + at;
          double rinv = 1;
          if (w) {
            double ss = 0;
            for (int64_t p = 0; p < P; ++p) ss += static_cast<double>(o[p]) * o[p];
            rinv = 1.0 / std::sqrt(ss / static_cast<double>(P) + a.norm_eps);
          }
          double dot = 0;  // sum_p o w d(o')
          for (int64_t p = 0; p < P; ++p) {
            const float mz = a.mimo_z ? a.mimo_z[hr + p] : 1.f;
            const float zr = z[p] * mz, sg = silu(zr);
            const double on = w ? o[p] * rinv * w[p] : o[p];
            const double dgated = a.mimo_o ? static_cast<double>(dy[p]) * a.mimo_o[hr + p] : dy[p];
            dmo[r * P + p] += dy[p] * on * sg;
            don[p] = dgated * sg;
            const double dzr = dgated * on * silu_grad(zr);
            dz[p] += static_cast<float>(dzr * mz);
            dmz[r * P + p] += dzr * z[p];
            if (w) {
              dnorm[p] += don[p] * o[p] * rinv;
              dot += static_cast<double>(o[p]) * w[p] * don[p];
            }
          }
          const double c = dot * rinv * rinv * rinv / static_cast<double>(P);
          for (int64_t p = 0; p < P; ++p)
            d_o[p] = static_cast<float>(w ? rinv * w[p] * don[p] - o[p] * c : don[p]);
        }
      }
      for (int64_t k = 0; k < R * P; ++k) {
        if (g.dmimo_z) g.dmimo_z[h * R * P + k] += static_cast<float>(dmz[k]);
        if (g.dmimo_o) g.dmimo_o[h * R * P + k] += static_cast<float>(dmo[k]);
      }
      if (g.dnorm)
        for (int64_t p = 0; p < P; ++p) g.dnorm[h * P + p] += static_cast<float>(dnorm[p]);
    }
  });
}

}  // namespace ssm::ops
