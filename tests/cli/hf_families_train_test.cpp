// `ssm train` on every HF family's golden model directory (as published:
// HF's config and tensor names): the checkpoint is written, a run stopped
// and resumed gives the uninterrupted run's loss curve and weights exactly,
// and the trained model loads and scores the held-out text better.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "support/cli.h"
#include "support/compare.h"
#include "support/hf_families.h"
#include "support/train_log.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;
using testing::run_ssm;
using testing::slurp_file;

class HfFamilyTrain : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("ssm_hf_train_", GetParam(), "_", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "data.txt");
    for (int i = 0; i < 200; ++i)
      text << "line " << i % 37 << ": the quick brown fox jumps over the lazy dog.\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> train_args(const std::string& out,
                                      std::initializer_list<std::string> more = {}) {
    std::vector<std::string> args = {
        "train", testing::golden_dir("models/" + GetParam()), "--data", (dir_ / "data.txt").string(),
        "--out", (dir_ / out).string(), "--steps", "6", "--batch", "2", "--seq-len", "24", "--lr",
        "3e-3", "--warmup", "1", "--log-every", "1", "--threads", "2", "--seed", "7"};
    args.insert(args.end(), more);
    return args;
  }

  fs::path dir_;
};

TEST_P(HfFamilyTrain, AResumedRunIsExactAndTheModelScoresBetter) {
  const CliRun full = run_ssm(train_args("full"));
  ASSERT_EQ(full.code, 0) << full.err;
  const auto expected = testing::printed_step_losses(full.out);
  ASSERT_EQ(expected.size(), 6u) << full.out;
  ASSERT_TRUE(fs::exists(dir_ / "full" / "model.safetensors"));

  const CliRun first = run_ssm(train_args("split", {"--stop-at", "3"}));
  ASSERT_EQ(first.code, 0) << first.err;
  const CliRun rest = run_ssm(train_args("split", {"--resume"}));
  ASSERT_EQ(rest.code, 0) << rest.err;
  auto got = testing::printed_step_losses(first.out);
  for (const auto& [step, loss] : testing::printed_step_losses(rest.out)) got[step] = loss;
  EXPECT_EQ(got, expected);
  EXPECT_EQ(slurp_file(dir_ / "split" / "model.safetensors"),
            slurp_file(dir_ / "full" / "model.safetensors"));

  // The trained model loads, and scores the held-out text better than the
  // published one (training losses are of different batches).
  auto held_out_loss = [&](const std::string& model) {
    const CliRun r =
        run_ssm({"score", model, "--data", (dir_ / "data.txt").string(), "--seq-len", "24"});
    EXPECT_EQ(r.code, 0) << r.err;
    const size_t at = r.out.find("loss:");
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? 0.0 : std::stod(r.out.substr(at + 5));
  };
  EXPECT_LT(held_out_loss((dir_ / "full").string()),
            held_out_loss(testing::golden_dir("models/" + GetParam())));
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyTrain, ::testing::ValuesIn(testing::hf_families()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ssm
