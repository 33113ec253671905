// set_row_bound (src/cli/bench_row_bound.cpp, compiled into this program):
// host bounds give the SGEMM and streaming-read bounds, a device's bounds
// the bf16-linear and copy bounds, with the state's bytes counted once
// against a read rate and twice (read and written) against a copy rate; a
// host decode row's read is the higher of the two measured around it.
#include "cli/bench_row_bound.h"

#include <gtest/gtest.h>

#include <utility>

namespace ssm::cli {
namespace {

ModelCosts costs() {
  ModelCosts c;
  c.decode_bytes_per_token = 1000;
  c.state_bytes_per_sequence = 100;
  c.prefill_flops_per_token = 2e6;
  return c;
}

TEST(BenchRowBound, HostBoundsAreSgemmAndRead) {
  const BenchBounds host{.threads = 2, .read_gbs = 10, .sgemm_gflops = 50};
  BenchRow pp{.batch = 3};
  set_row_bound(pp, BenchTest::kPrefill, host, costs());
  EXPECT_EQ(pp.bound_kind, "sgemm");
  EXPECT_DOUBLE_EQ(pp.bound, 50e9 / 2e6);
  EXPECT_EQ(pp.bound_with_state, 0);
  BenchRow tg{.batch = 3};
  set_row_bound(tg, BenchTest::kDecode, host, costs());
  EXPECT_EQ(tg.bound_kind, "read");
  EXPECT_DOUBLE_EQ(tg.bound, 3 * 10e9 / 1000);
  EXPECT_DOUBLE_EQ(tg.weight_bytes, 1000);
  EXPECT_DOUBLE_EQ(tg.state_bytes, 300);
  EXPECT_DOUBLE_EQ(tg.bound_with_state, 3 * 10e9 / (1000 + 300));
}

TEST(BenchRowBound, DecodeRowTakesTheHigherReadMeasuredAroundIt) {
  // The run's read (10 GB/s) is left aside for the row's own two.
  const BenchBounds host{.threads = 2, .read_gbs = 10, .sgemm_gflops = 50};
  for (const auto& [before, after] : {std::pair{30.0, 20.0}, std::pair{20.0, 30.0}}) {
    BenchRow tg{.batch = 2, .read_gbs_before = before, .read_gbs_after = after};
    set_row_bound(tg, BenchTest::kDecode, host, costs());
    EXPECT_DOUBLE_EQ(tg.bound, 2 * 30e9 / 1000);
    EXPECT_DOUBLE_EQ(tg.bound_with_state, 2 * 30e9 / (1000 + 200));
  }
  // A prefill row keeps the run's SGEMM bound whatever reads it carries.
  BenchRow pp{.batch = 2, .read_gbs_before = 30, .read_gbs_after = 20};
  set_row_bound(pp, BenchTest::kPrefill, host, costs());
  EXPECT_DOUBLE_EQ(pp.bound, 50e9 / 2e6);
}

TEST(BenchRowBound, DeviceBoundsAreBf16LinearAndCopy) {
  // Host fields set too: a device's bounds must not fall back on them.
  const BenchBounds dev{.threads = 1, .read_gbs = 10, .sgemm_gflops = 50, .device = "cuda:0",
                        .linear_flops = 8e14, .linear_n = 8192, .copy_bytes_per_s = 3e12};
  BenchRow pp{.batch = 8};
  set_row_bound(pp, BenchTest::kPrefill, dev, costs());
  EXPECT_EQ(pp.bound_kind, "bf16-linear");
  EXPECT_DOUBLE_EQ(pp.bound, 8e14 / 2e6);
  BenchRow tg{.batch = 8};
  set_row_bound(tg, BenchTest::kDecode, dev, costs());
  EXPECT_EQ(tg.bound_kind, "copy");
  EXPECT_DOUBLE_EQ(tg.bound, 8 * 3e12 / 1000);
  EXPECT_DOUBLE_EQ(tg.state_bytes, 800);
  EXPECT_DOUBLE_EQ(tg.bound_with_state, 8 * 3e12 / (1000 + 2 * 800));
}

}  // namespace
}  // namespace ssm::cli
