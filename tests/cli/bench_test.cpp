// ssm bench on a tiny model: every (dtype, batch, test) row with its
// repetitions, a positive rate and its bound measured in the run, the
// fraction consistent with both; the Markdown table; and every bad flag a
// one-line usage error naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/usage_error.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::contains;
using testing::golden_dir;
using testing::expect_usage_error;
using testing::run_ssm;

TEST(CliBench, JsonHasEveryCaseWithItsBound) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  const testing::CliRun r = run_ssm({"bench", m, "-p", "16", "-n", "4", "-r", "2", "-b", "1,2", "-t",
                                     "1", "--dtype", "f32,bf16,int8", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["bounds"].size(), 1u);
  EXPECT_GT(doc["bounds"][0]["read_gbs"].get<double>(), 0);
  EXPECT_GT(doc["bounds"][0]["sgemm_gflops"].get<double>(), 0);
  // OpenBLAS's kernels, named: a fallback (an unknown CPU) makes the SGEMM bound theirs.
  EXPECT_FALSE(doc["bounds"][0]["blas_core"].get<std::string>().empty());
  ASSERT_EQ(doc["results"].size(), 12u);  // 3 dtypes x 2 batches x (prefill, decode)
  double f32_bytes = 0, bf16_bytes = 0, int8_bytes = 0;
  for (const auto& row : doc["results"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["repetitions"], 2);
    const double tps = row["tokens_per_s"], bound = row["bound_tokens_per_s"];
    EXPECT_GT(tps, 0);
    EXPECT_GT(bound, 0);
    EXPECT_NEAR(row["fraction_of_bound"].get<double>(), tps / bound, 1e-9 * tps / bound);
    EXPECT_GT(row["peak_rss_bytes"].get<double>(), 0);
    const std::string test = row["test"];
    EXPECT_TRUE(test == "pp16" || test == "tg4") << test;
    if (test == "tg4" && row["batch"] == 1) {
      if (row["dtype"] == "f32") f32_bytes = row["weight_bytes_per_step"];
      if (row["dtype"] == "bf16") bf16_bytes = row["weight_bytes_per_step"];
      if (row["dtype"] == "int8") int8_bytes = row["weight_bytes_per_step"];
    }
    if (test == "tg4") {
      // The state of mamba2_hf_tiny, from its config: 2 layers, each with
      // 8 heads x 16 x 16 F32 values and 3 x 160 convolution inputs, per
      // sequence of the batch. The bound with the state counts those bytes
      // once, at the same read rate.
      // Its bound is at the higher of the reads measured just before and
      // just after it, not at the run's read.
      const double before = row["read_gbs_before"], after = row["read_gbs_after"];
      EXPECT_GT(before, 0);
      EXPECT_GT(after, 0);
      const double weights = row["weight_bytes_per_step"];
      EXPECT_NEAR(bound, row["batch"].get<double>() * std::max(before, after) * 1e9 / weights,
                  1e-9 * bound);
      const double state = row["batch"].get<double>() * 2 * (8 * 16 * 16 + 3 * 160) * 4;
      EXPECT_EQ(row["state_bytes_per_step"].get<double>(), state);
      const double with_state = row["bound_with_state_tokens_per_s"];
      EXPECT_NEAR(with_state, bound * weights / (weights + state), 1e-9 * bound);
      EXPECT_NEAR(row["fraction_of_bound_with_state"].get<double>(), tps / with_state,
                  1e-9 * tps / with_state);
    } else {
      EXPECT_EQ(row["bound_with_state_tokens_per_s"].get<double>(), 0);
      EXPECT_EQ(row["read_gbs_before"].get<double>(), 0);
      EXPECT_EQ(row["read_gbs_after"].get<double>(), 0);
    }
  }
  // int8 reads about a quarter of the bytes (norms, conv and scan vectors stay F32).
  EXPECT_GT(f32_bytes, 0);
  EXPECT_LT(bf16_bytes, 0.6 * f32_bytes);
  EXPECT_LT(int8_bytes, 0.4 * f32_bytes);
}

TEST(CliBench, MarkdownTable) {
  const testing::CliRun r =
      run_ssm({"bench", golden_dir("mamba2_hf_tiny"), "-p", "8", "-n", "0", "-r", "1", "-t", "1,2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "| dtype | threads | batch | test | tokens/s |")) << r.out;
  EXPECT_TRUE(contains(r.out, "| of bound | of read+state |")) << r.out;
  EXPECT_TRUE(contains(r.out, "| f32 | 1 | 1 | pp8 |")) << r.out;
  EXPECT_TRUE(contains(r.out, "| f32 | 2 | 1 | pp8 |")) << r.out;
  EXPECT_FALSE(contains(r.out, "tg0")) << r.out;
  EXPECT_TRUE(contains(r.out, "bounds, 2 threads: streaming read")) << r.out;
  // Prefill rows carry no reads of their own.
  EXPECT_TRUE(contains(r.out, "| of read+state | read before / after (GB/s) | peak RSS |")) << r.out;
  EXPECT_TRUE(contains(r.out, "% | - | - |")) << r.out;
}

TEST(CliBench, MarkdownDecodeRowsShowTheReadsAroundThem) {
  const testing::CliRun r =
      run_ssm({"bench", golden_dir("mamba2_hf_tiny"), "-p", "0", "-n", "2", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  // "| 41.3 / 40.9 |" after the fraction with the state.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\| tg2 \|.*% \| [0-9]+\.[0-9] / [0-9]+\.[0-9] \| )")))
      << r.out;
}

TEST(CliBench, NamesTheMixerOfMambaOneModels) {
  const testing::CliRun r =
      run_ssm({"bench", golden_dir("models/mamba1_hf"), "-p", "8", "-n", "2", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, ": mamba1, 3 layers")) << r.out;
}

TEST(CliBench, BadFlagsAreUsageErrors) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  expect_usage_error({"bench", "/nonexistent/model"}, "/nonexistent/model");
  expect_usage_error({"bench", m, "-p", "-1"}, "--prompt");
  expect_usage_error({"bench", m, "-n", "abc"}, "--decode");
  expect_usage_error({"bench", m, "-p", "0", "-n", "0"}, "-p 0 and -n 0");
  expect_usage_error({"bench", m, "-r", "0"}, "--repetitions");
  expect_usage_error({"bench", m, "-r", "99999999999999999999"}, "--repetitions");
  expect_usage_error({"bench", m, "-b", "0"}, "--batch");
  expect_usage_error({"bench", m, "-b", "1.5"}, "--batch");
  expect_usage_error({"bench", m, "-t", "0"}, "--threads");
  expect_usage_error({"bench", m, "--dtype", "f8"}, "--dtype");
  expect_usage_error({"bench", m, "--backend", "nope"}, "--backend");
  expect_usage_error({"bench", m, "-b", "4096", "-p", "1048576"}, "tokens in one prefill");
  expect_usage_error({"bench", m, "-p", "16", "-p", "32"}, "--prompt given 2 times");
}

}  // namespace
}  // namespace ssm
