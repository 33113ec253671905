// --state-dtype on the commands that run a model with a state: bad and
// repeated values are usage errors naming the flag, bench rows and JSON
// name a BF16 state and count its real bytes, and generation with a BF16
// state runs. (No backend built here refuses a BF16 state since cuda takes
// it: compute_options.cpp's refusal is for a device backend that does not.)
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "ssm/io/safetensors.h"
#include "support/cli.h"
#include "support/compare.h"
#include "support/temp_dir.h"
#include "support/usage_error.h"

namespace ssm {
namespace {

using testing::contains;
using testing::expect_usage_error;
using testing::golden_dir;
using testing::run_ssm;

TEST(CliStateDtype, BadRepeatedAndUnsupportedAreUsageErrors) {
  const testing::TempDir tmp;
  const std::string m = golden_dir("mamba2_hf_tiny"), input = (tmp / "ids.safetensors").string(),
                    out = (tmp / "never.safetensors").string();
  Tensor ids = Tensor::empty(DType::kI64, {1, 4});
  const int64_t values[] = {3, 17, 42, 9};
  std::memcpy(ids.raw(), values, sizeof values);
  save_safetensors(input, {{"input_ids", ids}});
  const std::vector<std::vector<std::string>> commands = {
      {"generate", m, "--prompt-ids", "1,2", "-n", "1"},
      {"logits", m, "--input", input, "--output", out},
      {"score", m, "--data", input},
      {"bench", m, "-p", "4", "-n", "0"},
      {"serve", m, "--port", "0"},
  };
  for (const auto& command : commands) {
    SCOPED_TRACE(command[0]);
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--state-dtype", "f16"}, {"--state-dtype", "BF16"},
          {"--state-dtype", ""}, {"--state-dtype", "bf16", "--state-dtype", "f32"}}) {
      std::vector<std::string> args = command;
      args.insert(args.end(), bad.begin(), bad.end());
      expect_usage_error(args, "--state-dtype");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  // Training has no inference state: the flag is not taken.
  const testing::CliRun help = run_ssm({"train", "--help"});
  EXPECT_FALSE(contains(help.out, "--state-dtype")) << help.out;
}

TEST(CliStateDtype, BenchNamesABf16StateAndCountsItsBytes) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  const testing::CliRun r = run_ssm({"bench", m, "-p", "0", "-n", "4", "-r", "1", "-b", "2", "-t", "1",
                                     "--dtype", "f32", "--state-dtype", "bf16", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["results"].size(), 1u);
  const auto& row = doc["results"][0];
  EXPECT_EQ(row["state_dtype"], "bf16");
  // 2 layers, each 8 heads x 16 x 16 BF16 values and 3 x 160 F32
  // convolution inputs, per sequence (bench_test.cpp has the F32 figure).
  EXPECT_EQ(row["state_bytes_per_step"].get<double>(), 2.0 * 2 * (8 * 16 * 16 * 2 + 3 * 160 * 4));
  const testing::CliRun table =
      run_ssm({"bench", m, "-p", "0", "-n", "2", "-r", "1", "-b", "1", "-t", "1", "--dtype", "f32",
               "--state-dtype", "bf16"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "| f32, state bf16 |")) << table.out;
  // The default F32 state names nothing.
  const testing::CliRun plain = run_ssm(
      {"bench", m, "-p", "0", "-n", "2", "-r", "1", "-b", "1", "-t", "1", "--dtype", "f32", "--json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["results"][0].contains("state_dtype"));
}

TEST(CliStateDtype, GenerateRunsWithABf16State) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  const testing::CliRun r =
      run_ssm({"generate", m, "--prompt-ids", "1,2,3", "-n", "8", "--state-dtype", "bf16"});
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace ssm
