// The chunked Mamba-3 scan backward against finite differences of the
// sequential trapezoidal recurrence in float64 (SPEC §4), over SISO and MIMO
// ranks, chunk sizes (also not dividing the length), batch rows, saved
// starting states and thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "fd.h"
#include "ssm/train/ops/mamba3_scan_backward.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

struct Problem {
  int64_t B, L, H, R, P = 3, N = 4;
  std::vector<double> q, k, v, dt, A, lam, D, S0, kp, vp, w;

  // J = sum(w * o) of S_t = alpha S_{t-1} + beta sum_r v_{t-1,r} k_{t-1,r}^T
  // + gamma sum_r v_t,r k_t,r^T, o_t,r = S_t q_t,r + D v_t,r.
  double J() const {
    double total = 0;
    for (int64_t i = 0; i < B * H; ++i) {
      std::vector<double> S(S0.begin() + i * P * N, S0.begin() + (i + 1) * P * N);
      std::vector<double> kprev(kp.begin() + i * R * N, kp.begin() + (i + 1) * R * N);
      std::vector<double> vprev(vp.begin() + i * R * P, vp.begin() + (i + 1) * R * P);
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t;
        const double d = dt[step], alpha = std::exp(A[step] * d);
        const double beta = (1 - lam[step]) * d * alpha, gamma = lam[step] * d;
        const double* kt = k.data() + step * R * N;
        const double* vt = v.data() + step * R * P;
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n) {
            double s = alpha * S[p * N + n];
            for (int64_t r = 0; r < R; ++r)
              s += beta * vprev[r * P + p] * kprev[r * N + n] + gamma * vt[r * P + p] * kt[r * N + n];
            S[p * N + n] = s;
          }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t p = 0; p < P; ++p) {
            double o = D[i % H] * vt[r * P + p];
            for (int64_t n = 0; n < N; ++n) o += S[p * N + n] * q[(step * R + r) * N + n];
            total += w[(step * R + r) * P + p] * o;
          }
        kprev.assign(kt, kt + R * N);
        vprev.assign(vt, vt + R * P);
      }
    }
    return total;
  }
};

using Case = std::tuple<int64_t /*chunk rows*/, int64_t /*L*/, int64_t /*R*/, int64_t /*B*/, bool /*state*/>;

class Mamba3ScanBackward : public ::testing::TestWithParam<Case> {};

TEST_P(Mamba3ScanBackward, MatchesFiniteDifferencesOfRecurrence) {
  const auto [chunk, L, R, B, with_state] = GetParam();
  Problem pr{.B = B, .L = L, .H = 2, .R = R};
  const uint64_t seed = 300 + chunk * 13 + L * 7 + R * 5 + B * 3 + with_state;
  const int64_t steps = B * pr.H * L, heads = B * pr.H;
  pr.q = random_doubles(steps * R * pr.N, seed);
  pr.k = random_doubles(steps * R * pr.N, seed + 1);
  pr.v = random_doubles(steps * R * pr.P, seed + 2);
  pr.dt = random_doubles(steps, seed + 3, 0.01f, 0.8f);
  pr.A = random_doubles(steps, seed + 4, -3.f, -0.1f);
  pr.lam = random_doubles(steps, seed + 5, 0.05f, 0.95f);
  pr.D = random_doubles(pr.H, seed + 6);
  const double on = with_state ? 1.0 : 0.0;
  pr.S0 = random_doubles(heads * pr.P * pr.N, seed + 7);
  pr.kp = random_doubles(heads * R * pr.N, seed + 8);
  pr.vp = random_doubles(heads * R * pr.P, seed + 9);
  for (auto* s : {&pr.S0, &pr.kp, &pr.vp})
    for (double& x : *s) x *= on;
  pr.w = random_doubles(steps * R * pr.P, seed + 10);
  auto J = [&] { return pr.J(); };
  const auto gq = fd_gradient(pr.q, J), gk = fd_gradient(pr.k, J), gv = fd_gradient(pr.v, J);
  const auto gdt = fd_gradient(pr.dt, J), gA = fd_gradient(pr.A, J), glam = fd_gradient(pr.lam, J);
  const auto gD = fd_gradient(pr.D, J);

  const auto q = to_float(pr.q), k = to_float(pr.k), v = to_float(pr.v), dt = to_float(pr.dt);
  const auto A = to_float(pr.A), lam = to_float(pr.lam), D = to_float(pr.D), w = to_float(pr.w);
  auto S0 = to_float(pr.S0), kp = to_float(pr.kp), vp = to_float(pr.vp);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), ddt(steps), dA(steps), dlam(steps);
    std::vector<float> dD(pr.H, 0.f);
    const ops::Mamba3ScanArgs args{
        .batch = B, .length = L, .heads = pr.H, .headdim = pr.P, .d_state = pr.N, .rank = R,
        .chunk = chunk, .q = q.data(), .k = k.data(), .v = v.data(), .dt = dt.data(), .A = A.data(),
        .lam = lam.data(), .D = D.data(), .o = nullptr,
        .ssm = with_state ? S0.data() : nullptr, .k_prev = with_state ? kp.data() : nullptr,
        .v_prev = with_state ? vp.data() : nullptr};
    ops::mamba3_scan_backward(args, w.data(),
                              {.dq = dq.data(), .dk = dk.data(), .dv = dv.data(), .ddt = ddt.data(),
                               .dA = dA.data(), .dlam = dlam.data(), .dD = dD.data()},
                              pool);
    EXPECT_LE(rel_error(dq, gq), 1e-4) << "dq, " << threads << " threads";
    EXPECT_LE(rel_error(dk, gk), 1e-4) << "dk";
    EXPECT_LE(rel_error(dv, gv), 1e-4) << "dv";
    EXPECT_LE(rel_error(ddt, gdt), 1e-4) << "ddt";
    EXPECT_LE(rel_error(dA, gA), 1e-4) << "dA";
    EXPECT_LE(rel_error(dlam, glam), 1e-4) << "dlam";
    EXPECT_LE(rel_error(dD, gD), 1e-4) << "dD";
  }
}

// Chunks count rows (time x rank): chunk 8 with R = 2 holds 4 steps.
INSTANTIATE_TEST_SUITE_P(Shapes, Mamba3ScanBackward,
                         ::testing::Values(Case{4, 11, 1, 1, false}, Case{4, 11, 2, 2, false},
                                           Case{8, 10, 2, 1, true}, Case{5, 9, 1, 2, true},
                                           Case{1, 5, 1, 1, false}, Case{64, 7, 2, 1, true},
                                           Case{6, 13, 2, 2, true}));

}  // namespace
}  // namespace ssm
