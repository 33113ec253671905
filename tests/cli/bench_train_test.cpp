// ssm bench --train on the host: a row per batch with ms/step, tokens/s,
// the fraction of the product rate measured in the run (consistent with
// both) and the peak memory; bad combinations are one-line usage errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::contains;
using testing::golden_dir;
using testing::run_ssm;

TEST(CliBenchTrain, JsonHasARowPerBatchWithItsBound) {
  const testing::CliRun r = run_ssm({"bench", golden_dir("mamba2_hf_tiny"), "--train", "-p", "16",
                                     "-b", "1,2", "--train-steps", "2", "-t", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const double rate = doc["bound_flops"], params = doc["parameters"];
  EXPECT_GT(rate, 0);
  EXPECT_GT(params, 0);
  ASSERT_EQ(doc["rows"].size(), 2u);
  for (const auto& row : doc["rows"]) {
    SCOPED_TRACE(row.dump());
    const double tps = row["tokens_per_s"], ms = row["ms_per_step"];
    EXPECT_GT(tps, 0);
    EXPECT_NEAR(tps * ms / 1e3, 16.0 * row["batch"].get<double>(), 1e-6 * tps * ms);
    EXPECT_NEAR(row["of_bound"].get<double>(), 6 * params * tps / rate, 1e-9 * tps);
    EXPECT_GT(row["peak_bytes"].get<double>(), 0);
    EXPECT_TRUE(std::isfinite(row["loss"].get<double>()));
  }
}

TEST(CliBenchTrain, MarkdownTable) {
  const testing::CliRun r = run_ssm({"bench", golden_dir("mamba2_hf_tiny"), "--train", "-p", "8",
                                     "--train-steps", "1", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "| batch x length | ms/step | tokens/s | of bound | peak memory |"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "| 1 x 8 |")) << r.out;
}

TEST(CliBenchTrain, BadCombinationsAreUsageErrors) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  for (const auto& [args, names] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"bench", m, "--bf16"}, "--bf16 goes with --train"},
           {{"bench", m, "--train", "--bf16", "--backend", "cpu", "-p", "8"}, "--bf16"},
           {{"bench", m, "--train", "-p", "1"}, "--train needs -p"},
           {{"bench", m, "--train", "--train-steps", "0"}, "--train-steps"}}) {
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 2) << names << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("ssm: error: ", 0), 0u) << r.err;
    EXPECT_TRUE(contains(r.err, names)) << r.err;
    EXPECT_EQ(r.out, "") << names;
  }
}

}  // namespace
}  // namespace ssm
