// The chunked SSD scan against the sequential recurrence (the oracle), over
// chunk sizes, lengths that are not multiples of the chunk, group counts,
// batch sizes, starting states and thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ssm/ops/ssd_scan.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

struct ScanData {
  int64_t B, L, H, P, N, G;
  std::vector<float> x, bc, dt, A, D, state;
  ops::SsdScanArgs args(float* y, float* st, int64_t chunk) {
    return ops::SsdScanArgs{.batch = B, .length = L, .heads = H, .headdim = P, .d_state = N,
                            .groups = G, .chunk = chunk, .x = x.data(), .ld_x = H * P,
                            .B = bc.data(), .C = bc.data() + G * N, .ld_bc = 2 * G * N,
                            .dt = dt.data(), .ld_dt = H, .A = A.data(), .D = D.data(), .y = y,
                            .ld_y = H * P, .state = st};
  }
};

ScanData make_data(int64_t B, int64_t L, int64_t G, uint64_t seed, bool fresh_state) {
  ScanData d{B, L, 4, 8, 16, G};
  d.H = 4 * G / std::max<int64_t>(1, G / 2);  // 4 or 8 heads, divisible by G
  d.x = testing::random_vector(B * L * d.H * d.P, seed);
  d.bc = testing::random_vector(B * L * 2 * G * d.N, seed + 1);
  // dt in (0.001, 0.5) after softplus; A spans slow to fast decay.
  d.dt = testing::random_vector(B * L * d.H, seed + 2, 0.001f, 0.5f);
  d.A = testing::random_vector(d.H, seed + 3, -4.f, -0.05f);
  d.D = testing::random_vector(d.H, seed + 4);
  d.state = fresh_state ? std::vector<float>(B * d.H * d.P * d.N, 0.f)
                        : testing::random_vector(B * d.H * d.P * d.N, seed + 5);
  return d;
}

using ScanParam = std::tuple<int64_t /*chunk*/, int64_t /*L*/, int64_t /*G*/, int64_t /*B*/>;

class SsdScanChunked : public ::testing::TestWithParam<ScanParam> {};

TEST_P(SsdScanChunked, EqualsSequentialRecurrence) {
  const auto [chunk, L, G, B] = GetParam();
  for (bool fresh : {true, false}) {
    ScanData d = make_data(B, L, G, 1000 + chunk * 7 + L + G, fresh);
    std::vector<float> y_ref(B * L * d.H * d.P), y(B * L * d.H * d.P);
    std::vector<float> st_ref = d.state, st = d.state;
    ops::ssd_scan_reference(d.args(y_ref.data(), st_ref.data(), chunk));
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      st = d.state;
      ops::ssd_scan_chunked(d.args(y.data(), st.data(), chunk), pool);
      EXPECT_LE(testing::max_rel_error(y.data(), y_ref.data(), y.size()), 2e-5)
          << "outputs, fresh=" << fresh << " threads=" << threads;
      EXPECT_LE(testing::max_rel_error(st.data(), st_ref.data(), st.size()), 2e-5)
          << "final state, fresh=" << fresh << " threads=" << threads;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SsdScanChunked,
    ::testing::Combine(::testing::Values(1, 7, 64, 256), ::testing::Values(1, 13, 100, 300),
                       ::testing::Values(1, 2, 4), ::testing::Values(1, 3)),
    [](const auto& info) {
      return cat("Q", std::get<0>(info.param), "_L", std::get<1>(info.param), "_G",
                 std::get<2>(info.param), "_B", std::get<3>(info.param));
    });

TEST(SsdScanChunked, SplittingASequenceCarriesTheState) {
  // Scanning [0, 37) then [37, 90) from the carried state equals one scan.
  ScanData whole = make_data(2, 90, 2, 77, true);
  std::vector<float> y_whole(2 * 90 * whole.H * whole.P), st_whole = whole.state;
  ThreadPool pool(2);
  ops::ssd_scan_chunked(whole.args(y_whole.data(), st_whole.data(), 16), pool);

  const int64_t cut = 37, HP = whole.H * whole.P, W = 2 * whole.G * whole.N;
  std::vector<float> st = whole.state;
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, cut}, {cut, 90}}) {
    ScanData part = whole;
    part.L = t1 - t0;
    part.x.clear(), part.bc.clear(), part.dt.clear();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t row = b * 90 + t;
        part.x.insert(part.x.end(), whole.x.begin() + row * HP, whole.x.begin() + (row + 1) * HP);
        part.bc.insert(part.bc.end(), whole.bc.begin() + row * W, whole.bc.begin() + (row + 1) * W);
        part.dt.insert(part.dt.end(), whole.dt.begin() + row * whole.H, whole.dt.begin() + (row + 1) * whole.H);
      }
    std::vector<float> y(2 * part.L * HP);
    ops::ssd_scan_chunked(part.args(y.data(), st.data(), 16), pool);
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_LE(testing::max_rel_error(y.data() + b * part.L * HP, y_whole.data() + (b * 90 + t0) * HP,
                                       part.L * HP), 2e-5);
  }
  EXPECT_LE(testing::max_rel_error(st.data(), st_whole.data(), st.size()), 2e-5);
}

}  // namespace
}  // namespace ssm
