// The chunked SSD backward against finite differences of the sequential
// recurrence in float64, over chunk sizes, lengths that are not multiples of
// the chunk, groups, batch rows, starting states and thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "fd.h"
#include "ssm/train/ops/ssd_scan_backward.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

struct Problem {
  int64_t B, L, H, P = 4, N = 6, G;
  int64_t ld_x() const { return H * P + 3; }  // strided rows, as inside the layer
  int64_t ld_bc() const { return 2 * G * N; }
  std::vector<double> x, bc, dt, A, D, state, w;

  // J = sum(w * y) of the recurrence S_t = exp(dt A) S_{t-1} + dt x B^T, y = S C + D x.
  double J() const {
    double s = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        std::vector<double> S(state.begin() + (b * H + h) * P * N, state.begin() + (b * H + h + 1) * P * N);
        for (int64_t t = 0; t < L; ++t) {
          const int64_t row = b * L + t;
          const double d = dt[row * H + h], decay = std::exp(d * A[h]);
          for (int64_t p = 0; p < P; ++p) {
            const double xv = x[row * ld_x() + h * P + p];
            double y = D[h] * xv;
            for (int64_t n = 0; n < N; ++n) {
              double& sv = S[p * N + n];
              sv = decay * sv + d * xv * bc[row * ld_bc() + g * N + n];
              y += sv * bc[row * ld_bc() + G * N + g * N + n];
            }
            s += w[row * H * P + h * P + p] * y;
          }
        }
      }
    return s;
  }
};

using Param = std::tuple<int64_t /*chunk*/, int64_t /*L*/, int64_t /*G*/, int64_t /*B*/, bool /*state*/>;

class SsdScanBackward : public ::testing::TestWithParam<Param> {};

TEST_P(SsdScanBackward, MatchesFiniteDifferencesOfRecurrence) {
  const auto [chunk, L, G, B, with_state] = GetParam();
  Problem pr{.B = B, .L = L, .H = 2 * G, .G = G};
  const uint64_t seed = 100 + chunk * 13 + L * 7 + G + B * 3 + with_state;
  pr.x = random_doubles(B * L * pr.ld_x(), seed);
  pr.bc = random_doubles(B * L * pr.ld_bc(), seed + 1);
  pr.dt = random_doubles(B * L * pr.H, seed + 2, 0.01f, 0.6f);
  pr.A = random_doubles(pr.H, seed + 3, -3.f, -0.1f);
  pr.D = random_doubles(pr.H, seed + 4);
  pr.state = with_state ? random_doubles(B * pr.H * pr.P * pr.N, seed + 5)
                        : std::vector<double>(B * pr.H * pr.P * pr.N, 0.0);
  pr.w = random_doubles(B * L * pr.H * pr.P, seed + 6);
  auto J = [&] { return pr.J(); };
  const auto gx = fd_gradient(pr.x, J), gbc = fd_gradient(pr.bc, J), gdt = fd_gradient(pr.dt, J);
  const auto gA = fd_gradient(pr.A, J), gD = fd_gradient(pr.D, J);

  const auto x = to_float(pr.x), bc = to_float(pr.bc), dt = to_float(pr.dt), A = to_float(pr.A);
  const auto D = to_float(pr.D), w = to_float(pr.w);
  auto st = to_float(pr.state);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> dx(x.size(), 0.f), dbc(bc.size(), 0.f), ddt(dt.size()), dA(pr.H, 0.f), dD(pr.H, 0.f);
    const ops::SsdScanArgs args{.batch = B, .length = L, .heads = pr.H, .headdim = pr.P,
                                .d_state = pr.N, .groups = G, .chunk = chunk, .x = x.data(),
                                .ld_x = pr.ld_x(), .B = bc.data(), .C = bc.data() + G * pr.N,
                                .ld_bc = pr.ld_bc(), .dt = dt.data(), .ld_dt = pr.H, .A = A.data(),
                                .D = D.data(), .y = nullptr, .ld_y = 0,
                                .state = with_state ? st.data() : nullptr};
    ops::ssd_scan_backward(args, w.data(), pr.H * pr.P,
                           {.dx = dx.data(), .ld_dx = pr.ld_x(), .dB = dbc.data(),
                            .dC = dbc.data() + G * pr.N, .ld_dbc = pr.ld_bc(), .ddt = ddt.data(),
                            .ld_ddt = pr.H, .dA = dA.data(), .dD = dD.data()},
                           pool);
    // The padding columns of x's rows are not written: compare heads only.
    for (size_t i = 0; i < dx.size(); ++i)
      if (static_cast<int64_t>(i % pr.ld_x()) >= pr.H * pr.P) dx[i] = 0.f;
    EXPECT_LE(rel_error(dx, gx), 1e-4) << "dx, " << threads << " threads";
    EXPECT_LE(rel_error(dbc, gbc), 1e-4) << "dB, dC";
    EXPECT_LE(rel_error(ddt, gdt), 1e-4) << "ddt";
    EXPECT_LE(rel_error(dA, gA), 1e-4) << "dA";
    EXPECT_LE(rel_error(dD, gD), 1e-4) << "dD";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdScanBackward,
                         ::testing::Values(Param{4, 11, 1, 1, false}, Param{4, 11, 2, 2, false},
                                           Param{5, 10, 1, 2, true}, Param{16, 7, 2, 1, true},
                                           Param{1, 5, 1, 1, false}, Param{3, 13, 2, 2, true}));

}  // namespace
}  // namespace ssm
