// The Mamba-3 scan op: the chunked form against the sequential step form on
// random inputs, from non-zero saved states, over ranks, chunk sizes that do
// not divide the length, and thread counts.
#include "ssm/ops/mamba3_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ssm/core/context.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

struct ScanCase {
  int64_t batch, length, heads, headdim, d_state, rank, chunk;
};
void PrintTo(const ScanCase& c, std::ostream* os) {
  *os << "B" << c.batch << " L" << c.length << " H" << c.heads << " P" << c.headdim << " N"
      << c.d_state << " R" << c.rank << " chunk " << c.chunk;
}

struct ScanData {
  std::vector<float> q, k, v, dt, A, lam, D, o, ssm, k_prev, v_prev;

  ScanData(const ScanCase& c, uint64_t seed) {
    const int64_t BH = c.batch * c.heads, rows = BH * c.length * c.rank;
    q = testing::random_vector(rows * c.d_state, seed + 1, -0.5f, 0.5f);
    k = testing::random_vector(rows * c.d_state, seed + 2, -0.5f, 0.5f);
    v = testing::random_vector(rows * c.headdim, seed + 3);
    dt = testing::random_vector(BH * c.length, seed + 4, 0.01f, 0.6f);
    A = testing::random_vector(BH * c.length, seed + 5, -3.f, -0.05f);
    lam = testing::random_vector(BH * c.length, seed + 6, 0.05f, 0.95f);
    D = testing::random_vector(c.heads, seed + 7);
    o.assign(rows * c.headdim, NAN);
    ssm = testing::random_vector(BH * c.headdim * c.d_state, seed + 8);
    k_prev = testing::random_vector(BH * c.rank * c.d_state, seed + 9, -0.5f, 0.5f);
    v_prev = testing::random_vector(BH * c.rank * c.headdim, seed + 10);
  }

  ops::Mamba3ScanArgs args(const ScanCase& c) {
    return {.batch = c.batch,
            .length = c.length,
            .heads = c.heads,
            .headdim = c.headdim,
            .d_state = c.d_state,
            .rank = c.rank,
            .chunk = c.chunk,
            .q = q.data(),
            .k = k.data(),
            .v = v.data(),
            .dt = dt.data(),
            .A = A.data(),
            .lam = lam.data(),
            .D = D.data(),
            .o = o.data(),
            .ssm = ssm.data(),
            .k_prev = k_prev.data(),
            .v_prev = v_prev.data()};
  }
};

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  return testing::max_rel_error(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

class Mamba3Scan : public ::testing::TestWithParam<ScanCase> {};

TEST_P(Mamba3Scan, ChunkedEqualsSequential) {
  const ScanCase c = GetParam();
  ScanData ref(c, 42);
  Context one(1);
  ops::mamba3_scan_sequential(ref.args(c), one.pool());
  for (int threads : {1, 2}) {
    ScanData got(c, 42);
    Context ctx(threads);
    ops::mamba3_scan_chunked(got.args(c), ctx.pool());
    EXPECT_LE(rel(got.o, ref.o), 2e-5) << threads << " threads";
    EXPECT_LE(rel(got.ssm, ref.ssm), 2e-5);
    EXPECT_EQ(got.k_prev, ref.k_prev);
    EXPECT_EQ(got.v_prev, ref.v_prev);
  }
}

TEST_P(Mamba3Scan, SequentialMatchesTheRecurrenceInDouble) {
  const ScanCase c = GetParam();
  ScanData got(c, 7);
  const ScanData in(c, 7);
  Context ctx(2);
  ops::mamba3_scan_sequential(got.args(c), ctx.pool());
  const int64_t L = c.length, P = c.headdim, N = c.d_state, R = c.rank;
  std::vector<double> want(got.o.size());
  for (int64_t i = 0; i < c.batch * c.heads; ++i) {
    std::vector<double> S(in.ssm.begin() + i * P * N, in.ssm.begin() + (i + 1) * P * N);
    std::vector<double> kp(in.k_prev.begin() + i * R * N, in.k_prev.begin() + (i + 1) * R * N);
    std::vector<double> vp(in.v_prev.begin() + i * R * P, in.v_prev.begin() + (i + 1) * R * P);
    for (int64_t t = 0; t < L; ++t) {
      const int64_t s = i * L + t;
      const double dt = in.dt[s], lam = in.lam[s], alpha = std::exp(in.A[s] * dt);
      const double beta = (1 - lam) * dt * alpha, gamma = lam * dt;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t n = 0; n < N; ++n) {
          double u = 0;
          for (int64_t r = 0; r < R; ++r)
            u += beta * vp[r * P + p] * kp[r * N + n] +
                 gamma * in.v[(s * R + r) * P + p] * in.k[(s * R + r) * N + n];
          S[p * N + n] = alpha * S[p * N + n] + u;
        }
      for (int64_t r = 0; r < R; ++r)
        for (int64_t p = 0; p < P; ++p) {
          double acc = in.D[i % c.heads] * in.v[(s * R + r) * P + p];
          for (int64_t n = 0; n < N; ++n) acc += S[p * N + n] * in.q[(s * R + r) * N + n];
          want[(s * R + r) * P + p] = acc;
        }
      for (int64_t j = 0; j < R * N; ++j) kp[j] = in.k[s * R * N + j];
      for (int64_t j = 0; j < R * P; ++j) vp[j] = in.v[s * R * P + j];
    }
  }
  std::vector<float> wantf(want.begin(), want.end());
  EXPECT_LE(rel(got.o, wantf), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Mamba3Scan,
    ::testing::Values(ScanCase{2, 21, 3, 8, 16, 1, 8},    // SISO, partial last chunk
                      ScanCase{1, 40, 2, 16, 32, 1, 16},  // SISO, exact chunks
                      ScanCase{2, 19, 2, 8, 16, 2, 8},    // MIMO R=2, 4 steps a chunk
                      ScanCase{1, 23, 2, 8, 16, 4, 8},    // MIMO R=4, 2 steps a chunk
                      ScanCase{2, 9, 3, 8, 8, 4, 3},      // chunk smaller than R: 1 step
                      ScanCase{1, 1, 2, 8, 16, 2, 8},     // one step
                      ScanCase{1, 50, 1, 4, 8, 1, 64}),   // one chunk
    [](const auto& info) {
      const ScanCase& c = info.param;
      return "B" + std::to_string(c.batch) + "L" + std::to_string(c.length) + "R" +
             std::to_string(c.rank) + "Q" + std::to_string(c.chunk);
    });

}  // namespace
}  // namespace ssm
