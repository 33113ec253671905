// The decode step's per-head kernels (step_kernels.h) against a sequential
// reference in double: state widths N that are shorter than a vector, a
// whole number of vectors and a few values past one (the masked tail),
// ranks 1 to 5 (the fixed-rank paths 1, 2, 4 and the general one), one and
// several rows of the state. The state after the step and every output may
// differ from the reference only by F32 rounding: a few ulps of the sum of
// the magnitudes that form it. Entries of the state past N (the next row)
// must be left as they were.
#include "ops/cpu/step_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ssm {
namespace {

std::vector<float> random_values(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// |got - want| within 8 ulps of `magnitude` (F32 rounding of a sum of up to
// a few hundred terms, each rounded once: far below a wrong index or scale).
void expect_close(double want, float got, double magnitude, const char* what, int64_t i) {
  EXPECT_NEAR(got, want, 8 * 1.2e-7 * magnitude + 1e-30) << what << " " << i;
}

constexpr int64_t kWidths[] = {1, 3, 8, 15, 16, 17, 31, 33, 64, 128};

TEST(SsdStepHead, MatchesDoubleReference) {
  std::mt19937 rng(7);
  for (int64_t N : kWidths)
    for (int64_t P : {1, 3, 8}) {
      // One spare row of state past the head: it must stay as it was.
      std::vector<float> S = random_values(rng, (P + 1) * N);
      const std::vector<float> x = random_values(rng, P), B = random_values(rng, N),
                               C = random_values(rng, N), S0 = S;
      std::vector<float> y(static_cast<size_t>(P));
      const float dt = 0.37f, decay = std::exp(dt * -1.3f), d = 0.6f;
      cpu::ssd_step_head({.P = P,
                          .N = N,
                          .dt = dt,
                          .decay = decay,
                          .d = d,
                          .x = x.data(),
                          .B = B.data(),
                          .C = C.data(),
                          .y = y.data(),
                          .S = S.data()});
      for (int64_t p = 0; p < P; ++p) {
        double sum = 0, mag = 0;
        for (int64_t n = 0; n < N; ++n) {
          const double s = double(decay) * S0[p * N + n] + double(x[p]) * dt * B[n];
          expect_close(s, S[p * N + n],
                       std::fabs(decay * S0[p * N + n]) + std::fabs(x[p] * dt * B[n]), "state",
                       p * N + n);
          sum += s * C[n];
          mag += std::fabs(s * C[n]);
        }
        expect_close(sum + double(d) * x[p], y[p], mag + std::fabs(d * x[p]), "y", p);
      }
      for (int64_t i = P * N; i < (P + 1) * N; ++i) EXPECT_EQ(S[i], S0[i]) << "past the head " << i;
    }
}

TEST(Mamba3StepHead, MatchesDoubleReference) {
  std::mt19937 rng(11);
  for (int64_t N : kWidths)
    for (int64_t R : {1, 2, 3, 4, 5})
      for (int64_t P : {1, 5}) {
        std::vector<float> S = random_values(rng, (P + 1) * N);
        const std::vector<float> S0 = S, q = random_values(rng, R * N),
                                 k = random_values(rng, R * N), kp = random_values(rng, R * N),
                                 v = random_values(rng, R * P), vp = random_values(rng, R * P);
        std::vector<float> o(static_cast<size_t>(R * P));
        const float alpha = 0.83f, beta = 0.21f, gamma = 0.34f, D = -0.4f;
        cpu::mamba3_step_head({.P = P,
                               .N = N,
                               .R = R,
                               .alpha = alpha,
                               .beta = beta,
                               .gamma = gamma,
                               .D = D,
                               .q = q.data(),
                               .k = k.data(),
                               .v = v.data(),
                               .k_prev = kp.data(),
                               .v_prev = vp.data(),
                               .o = o.data(),
                               .S = S.data()});
        for (int64_t p = 0; p < P; ++p) {
          std::vector<double> s(static_cast<size_t>(N)), mag(static_cast<size_t>(N));
          for (int64_t n = 0; n < N; ++n) {
            s[n] = double(alpha) * S0[p * N + n];
            mag[n] = std::fabs(s[n]);
            for (int64_t r = 0; r < R; ++r) {
              const double a = double(beta) * vp[r * P + p] * kp[r * N + n];
              const double b = double(gamma) * v[r * P + p] * k[r * N + n];
              s[n] += a + b;
              mag[n] += std::fabs(a) + std::fabs(b);
            }
            expect_close(s[n], S[p * N + n], mag[n], "state", p * N + n);
          }
          for (int64_t r = 0; r < R; ++r) {
            double sum = 0, m = 0;
            for (int64_t n = 0; n < N; ++n) {
              sum += s[n] * q[r * N + n];
              m += mag[n] * std::fabs(q[r * N + n]);
            }
            const double dv = double(D) * v[r * P + p];
            expect_close(sum + dv, o[r * P + p], m + std::fabs(dv), "o", r * P + p);
          }
        }
        for (int64_t i = P * N; i < (P + 1) * N; ++i)
          EXPECT_EQ(S[i], S0[i]) << "past the head " << i;
      }
}

}  // namespace
}  // namespace ssm
