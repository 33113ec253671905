// The Mamba-3 prepare and output backwards against finite differences of
// float64 transcriptions of SPEC §4 (J = sum(w * outputs) for random w):
// SISO (adjacent rotary pairs) and MIMO R=2 (halves), rope_fraction 0.5 and
// 1.0, ngroups 1 and 2, the A floor active on some steps, the output norm on
// and off; 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "fd.h"
#include "ssm/train/ops/mamba3_output_backward.h"
#include "ssm/train/ops/mamba3_prepare_backward.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

constexpr double kTol = 5e-5;

double silu(double v) { return v / (1 + std::exp(-v)); }

struct PrepCase {
  int64_t R, G, S;  // rank, groups, angles (N = 8: S = 2 is rope 0.5, S = 4 is rope 1.0)
  bool halves;
};

// Segments [x | B | C | ddt | ddA | trap | ang] of width ld per row.
struct PrepProblem {
  int64_t B = 2, L = 6, H = 4, P = 3, N = 8, R, G, S;
  bool halves;
  double floor = 0.5;  // active where ddA < -1
  std::vector<double> proj, dt_bias, B_norm, C_norm, B_bias, C_bias, mimo_x;
  std::vector<double> wq, wk, wv, wdt, wA, wlam;

  int64_t RGN() const { return R * G * N; }
  int64_t off_B() const { return H * P; }
  int64_t off_C() const { return off_B() + RGN(); }
  int64_t off_ddt() const { return off_C() + RGN(); }
  int64_t ld() const { return off_ddt() + 3 * H + S; }

  void rotate(double* v, int64_t j, double phase) const {
    const int64_t i0 = halves ? j : 2 * j, i1 = halves ? j + N / 2 : 2 * j + 1;
    const double a = v[i0], b = v[i1], c = std::cos(phase), s = std::sin(phase);
    v[i0] = a * c - b * s;
    v[i1] = a * s + b * c;
  }

  // RMSNorm(src) * w + bias.
  void norm_bias(const double* src, const std::vector<double>& w, const double* bias, double* out) const {
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) ss += src[n] * src[n];
    const double r = 1 / std::sqrt(ss / N + 1e-5);
    for (int64_t n = 0; n < N; ++n) out[n] = src[n] * r * w[n] + bias[n];
  }

  double J() const {
    double total = 0;
    std::vector<double> q(N), k(N);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        std::vector<double> phase(S, 0.0);
        for (int64_t t = 0; t < L; ++t) {
          const double* row = proj.data() + (b * L + t) * ld();
          const int64_t step = (b * H + h) * L + t;
          const double dt = std::log1p(std::exp(row[off_ddt() + h] + dt_bias[h]));
          const double v = row[off_ddt() + H + h];
          const double A = std::min(-(v >= 0 ? 1 + v : 1 / (1 - v)), -floor);
          const double lam = 1 / (1 + std::exp(-row[off_ddt() + 2 * H + h]));
          total += wdt[step] * dt + wA[step] * A + wlam[step] * lam;
          for (int64_t j = 0; j < S; ++j)
            phase[j] += std::numbers::pi * std::tanh(row[off_ddt() + 3 * H + j]) * dt;
          for (int64_t r = 0; r < R; ++r) {
            const int64_t src = (r * G + g) * N, bias = (h * R + r) * N;
            norm_bias(row + off_C() + src, C_norm, C_bias.data() + bias, q.data());
            norm_bias(row + off_B() + src, B_norm, B_bias.data() + bias, k.data());
            for (int64_t j = 0; j < S; ++j) {
              rotate(q.data(), j, phase[j]);
              rotate(k.data(), j, phase[j]);
            }
            for (int64_t n = 0; n < N; ++n)
              total += wq[(step * R + r) * N + n] * q[n] + wk[(step * R + r) * N + n] * k[n];
            for (int64_t p = 0; p < P; ++p)
              total += wv[(step * R + r) * P + p] * row[h * P + p] * (R > 1 ? mimo_x[(h * R + r) * P + p] : 1.0);
          }
        }
      }
    return total;
  }
};

class Mamba3PrepareBackward : public ::testing::TestWithParam<PrepCase> {};

TEST_P(Mamba3PrepareBackward, MatchesFiniteDifferences) {
  const PrepCase pc = GetParam();
  PrepProblem pr{.R = pc.R, .G = pc.G, .S = pc.S, .halves = pc.halves};
  const uint64_t seed = 500 + pc.R * 7 + pc.G * 3 + pc.S;
  const int64_t rows = pr.B * pr.L, steps = pr.B * pr.H * pr.L, H = pr.H, R = pr.R, N = pr.N, P = pr.P;
  pr.proj = random_doubles(rows * pr.ld(), seed, -2.f, 2.f);
  pr.dt_bias = random_doubles(H, seed + 1, -1.f, 0.5f);
  pr.B_norm = random_doubles(N, seed + 2, 0.5f, 1.5f);
  pr.C_norm = random_doubles(N, seed + 3, 0.5f, 1.5f);
  pr.B_bias = random_doubles(H * R * N, seed + 4);
  pr.C_bias = random_doubles(H * R * N, seed + 5);
  pr.mimo_x = random_doubles(H * R * P, seed + 6);
  pr.wq = random_doubles(steps * R * N, seed + 7);
  pr.wk = random_doubles(steps * R * N, seed + 8);
  pr.wv = random_doubles(steps * R * P, seed + 9);
  pr.wdt = random_doubles(steps, seed + 10);
  pr.wA = random_doubles(steps, seed + 11);
  pr.wlam = random_doubles(steps, seed + 12);
  auto J = [&] { return pr.J(); };
  const auto gproj = fd_gradient(pr.proj, J), gdt_bias = fd_gradient(pr.dt_bias, J);
  const auto gBn = fd_gradient(pr.B_norm, J), gCn = fd_gradient(pr.C_norm, J);
  const auto gBb = fd_gradient(pr.B_bias, J), gCb = fd_gradient(pr.C_bias, J);
  const auto gmx = fd_gradient(pr.mimo_x, J);

  const auto proj = to_float(pr.proj), dt_bias = to_float(pr.dt_bias), Bn = to_float(pr.B_norm);
  const auto Cn = to_float(pr.C_norm), Bb = to_float(pr.B_bias), Cb = to_float(pr.C_bias);
  const auto mx = to_float(pr.mimo_x);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> phase(pr.B * H * pr.S, 0.f), bn(rows * pr.RGN()), cn(rows * pr.RGN()), rate(rows * pr.S);
    std::vector<float> dt(steps), A(steps), lam(steps), q(steps * R * N), k(steps * R * N), v(steps * R * P);
    std::vector<float> phases(steps * pr.S);
    const float* o = proj.data();
    const ops::Mamba3PrepareArgs a{
        .batch = pr.B, .length = pr.L, .heads = H, .headdim = P, .d_state = N, .groups = pr.G,
        .rank = R, .n_angles = pr.S,
        .pairs = pr.halves ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
        .x = o, .B = o + pr.off_B(), .C = o + pr.off_C(), .ddt = o + pr.off_ddt(),
        .ddA = o + pr.off_ddt() + H, .trap = o + pr.off_ddt() + 2 * H,
        .ang = o + pr.off_ddt() + 3 * H, .ld = pr.ld(), .dt_bias = dt_bias.data(),
        .B_norm = Bn.data(), .C_norm = Cn.data(), .B_bias = Bb.data(), .C_bias = Cb.data(),
        .mimo_x = R > 1 ? mx.data() : nullptr, .A_floor = static_cast<float>(pr.floor),
        .norm_eps = 1e-5f, .phase = phase.data(), .B_normed = bn.data(), .C_normed = cn.data(),
        .ang_rate = rate.data(), .dt = dt.data(), .A = A.data(), .lam = lam.data(), .q = q.data(),
        .k = k.data(), .v = v.data(), .phases = phases.data()};
    ops::mamba3_prepare(a, pool);
    int floored = 0;
    for (float x : A) floored += x == -static_cast<float>(pr.floor);
    EXPECT_GT(floored, 0) << "the floor should be active somewhere";

    auto dq = to_float(pr.wq), dk = to_float(pr.wk);
    const auto dv = to_float(pr.wv), ddt = to_float(pr.wdt), dA = to_float(pr.wA), dlam = to_float(pr.wlam);
    std::vector<float> dproj(proj.size(), 0.f), ddt_bias(H, 0.f), dBn(N, 0.f), dCn(N, 0.f);
    std::vector<float> dBb(H * R * N, 0.f), dCb(H * R * N, 0.f), dmx(H * R * P, 0.f);
    float* d = dproj.data();
    ops::mamba3_prepare_backward(
        a, {.dq = dq.data(), .dk = dk.data(), .dv = dv.data(), .ddt = ddt.data(), .dA = dA.data(),
            .dlam = dlam.data(), .dx = d, .dB = d + pr.off_B(), .dC = d + pr.off_C(),
            .dddt = d + pr.off_ddt(), .dddA = d + pr.off_ddt() + H, .dtrap = d + pr.off_ddt() + 2 * H,
            .dang = d + pr.off_ddt() + 3 * H, .ld = pr.ld(), .ddt_bias = ddt_bias.data(),
            .dB_norm = dBn.data(), .dC_norm = dCn.data(), .dB_bias = dBb.data(),
            .dC_bias = dCb.data(), .dmimo_x = R > 1 ? dmx.data() : nullptr},
        pool);
    EXPECT_LE(rel_error(dproj, gproj), kTol) << "d in_proj segments, " << threads << " threads";
    EXPECT_LE(rel_error(ddt_bias, gdt_bias), kTol) << "dt_bias";
    EXPECT_LE(rel_error(dBn, gBn), kTol) << "B_norm";
    EXPECT_LE(rel_error(dCn, gCn), kTol) << "C_norm";
    EXPECT_LE(rel_error(dBb, gBb), kTol) << "B_bias";
    EXPECT_LE(rel_error(dCb, gCb), kTol) << "C_bias";
    if (R > 1) {
      EXPECT_LE(rel_error(dmx, gmx), kTol) << "mimo_x";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Mamba3PrepareBackward,
                         ::testing::Values(PrepCase{1, 1, 2, false}, PrepCase{1, 2, 4, false},
                                           PrepCase{2, 1, 2, true}, PrepCase{2, 2, 4, true}));

struct OutCase {
  int64_t R;
  bool norm;
};

class Mamba3OutputBackward : public ::testing::TestWithParam<OutCase> {};

TEST_P(Mamba3OutputBackward, MatchesFiniteDifferences) {
  const auto [R, with_norm] = GetParam();
  const int64_t B = 2, L = 5, H = 3, P = 4, rows = B * L, ld_z = H * P + 2;
  const uint64_t seed = 600 + R * 2 + with_norm;
  auto o = random_doubles(rows * H * R * P, seed, -2.f, 2.f), z = random_doubles(rows * ld_z, seed + 1, -3.f, 3.f);
  auto mz = random_doubles(H * R * P, seed + 2), mo = random_doubles(H * R * P, seed + 3);
  auto norm = random_doubles(H * P, seed + 4, 0.5f, 1.5f);
  const auto w = random_doubles(rows * H * P, seed + 5);
  auto J = [&] {
    double total = 0;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < R; ++r) {
          const double* orow = o.data() + (((row / L * H + h) * L + row % L) * R + r) * P;
          double ss = 0;
          for (int64_t p = 0; p < P; ++p) ss += orow[p] * orow[p];
          const double s = with_norm ? 1 / std::sqrt(ss / P + 1e-5) : 1.0;
          for (int64_t p = 0; p < P; ++p) {
            const int64_t hr = (h * R + r) * P + p;
            const double zr = z[row * ld_z + h * P + p] * (R > 1 ? mz[hr] : 1.0);
            double val = orow[p] * silu(zr) * (with_norm ? s * norm[h * P + p] : 1.0);
            total += w[row * H * P + h * P + p] * val * (R > 1 ? mo[hr] : 1.0);
          }
        }
    return total;
  };
  const auto go = fd_gradient(o, J), gz = fd_gradient(z, J), gmz = fd_gradient(mz, J);
  const auto gmo = fd_gradient(mo, J), gnorm = fd_gradient(norm, J);
  const auto of = to_float(o), zf = to_float(z), mzf = to_float(mz), mof = to_float(mo);
  const auto nf = to_float(norm), wf = to_float(w);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const ops::Mamba3OutputArgs a{.batch = B, .length = L, .heads = H, .headdim = P, .rank = R,
                                  .o = of.data(), .z = zf.data(), .ld_z = ld_z,
                                  .mimo_z = R > 1 ? mzf.data() : nullptr,
                                  .mimo_o = R > 1 ? mof.data() : nullptr,
                                  .norm = with_norm ? nf.data() : nullptr, .norm_eps = 1e-5f};
    std::vector<float> d_o(of.size()), dz(zf.size(), 0.f), dmz(mzf.size(), 0.f), dmo(mof.size(), 0.f);
    std::vector<float> dnorm(nf.size(), 0.f);
    ops::mamba3_output_backward(a, {.dy = wf.data(), .ld_dy = H * P, .d_o = d_o.data(), .dz = dz.data(),
                                    .ld_dz = ld_z, .dmimo_z = R > 1 ? dmz.data() : nullptr,
                                    .dmimo_o = R > 1 ? dmo.data() : nullptr,
                                    .dnorm = with_norm ? dnorm.data() : nullptr},
                                pool);
    EXPECT_LE(rel_error(d_o, go), kTol) << "do, " << threads << " threads";
    EXPECT_LE(rel_error(dz, gz), kTol) << "dz";  // the padding columns stay 0 on both sides
    if (R > 1) {
      EXPECT_LE(rel_error(dmz, gmz), kTol) << "mimo_z";
      EXPECT_LE(rel_error(dmo, gmo), kTol) << "mimo_o";
    }
    if (with_norm) {
      EXPECT_LE(rel_error(dnorm, gnorm), kTol) << "norm";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Mamba3OutputBackward,
                         ::testing::Values(OutCase{1, false}, OutCase{1, true}, OutCase{2, false},
                                           OutCase{2, true}));

}  // namespace
}  // namespace ssm
