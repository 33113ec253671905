// `ssm train` never destroys or litters what it was given: MODEL's weights
// are overwritten only with --in-place, a run refused for its inputs
// creates nothing, an earlier run's checkpoint is continued or kept, and a
// schedule that cannot do what it says is refused or warned about.
#include <gtest/gtest.h>

#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_ssm;
using testing::slurp_file;

class TrainSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_bytes(dir_ / "config.json", R"({"d_model": 32, "n_layer": 1, "vocab_size": 256,
      "pad_vocab_size_multiple": 8, "d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {},
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 16}, "tie_embeddings": true})");
    std::string text;
    for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i % 37) + ": the quick brown fox.\n";
    testing::write_bytes(dir_ / "data.txt", text);
    ASSERT_EQ(run_ssm({"init", "--config", path("config.json"), "--out", path("base")}).code, 0);
    weights_ = slurp_file(dir_ / "base/model.safetensors");
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> train(std::vector<std::string> more) const {
    std::vector<std::string> args = {"train", path("base"), "--data", path("data.txt"), "--steps", "2",
                                     "--batch", "2", "--seq-len", "16", "--warmup", "1", "--threads", "1",
                                     "--eval-tokens", "64"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  testing::TempDir dir_;
  std::string weights_;
};

TEST_F(TrainSafety, WithoutOutOrInPlaceNothingIsTouched) {
  const testing::CliRun r = run_ssm(train({}));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "ssm: error: --out DIR is required")) << r.err;
  EXPECT_TRUE(contains(r.err, "--in-place")) << r.err;
  EXPECT_EQ(slurp_file(dir_ / "base/model.safetensors"), weights_);
  EXPECT_FALSE(fs::exists(dir_ / "base/checkpoint.safetensors"));

  const testing::CliRun same = run_ssm(train({"--out", path("base/.")}));
  EXPECT_EQ(same.code, 2);
  EXPECT_TRUE(contains(same.err, "is MODEL itself")) << same.err;
  EXPECT_EQ(slurp_file(dir_ / "base/model.safetensors"), weights_);
}

TEST_F(TrainSafety, OutAndInPlaceTrainWhereTheySay) {
  const testing::CliRun out = run_ssm(train({"--out", path("tuned")}));
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(slurp_file(dir_ / "base/model.safetensors"), weights_);
  EXPECT_NE(slurp_file(dir_ / "tuned/model.safetensors"), weights_);
  EXPECT_EQ(slurp_file(dir_ / "tuned/config.json"), slurp_file(dir_ / "base/config.json"));

  const testing::CliRun in_place = run_ssm(train({"--in-place"}));
  ASSERT_EQ(in_place.code, 0) << in_place.err;
  EXPECT_EQ(slurp_file(dir_ / "base/model.safetensors"), slurp_file(dir_ / "tuned/model.safetensors"));
  EXPECT_EQ(run_ssm(train({"--in-place", "--out", path("x")})).code, 2);
}

// A second run into the same --out without --resume (a forgotten flag)
// would start over and replace the first run's checkpoint.
TEST_F(TrainSafety, AnEarlierRunsCheckpointIsNotReplacedWithoutResume) {
  auto first = train({"--out", path("run"), "--stop-at", "1"});
  *(std::find(first.begin(), first.end(), "--steps") + 1) = "3";
  ASSERT_EQ(run_ssm(first).code, 0);
  const std::string checkpoint = slurp_file(dir_ / "run/checkpoint.safetensors");
  const testing::CliRun again = run_ssm(train({"--out", path("run")}));
  EXPECT_EQ(again.code, 2);
  EXPECT_TRUE(contains(again.err, "ssm: error: --out " + path("run") + ": holds " + path("run") +
                                      "/checkpoint.safetensors of an earlier run; --resume continues it"))
      << again.err;
  EXPECT_EQ(slurp_file(dir_ / "run/checkpoint.safetensors"), checkpoint);
}

TEST_F(TrainSafety, RefusedRunLeavesNoOutputDirectory) {
  auto args = train({"--out", path("never")});
  args[3] = path("missing.txt");
  const testing::CliRun missing = run_ssm(args);
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(contains(missing.err, "--data: " + path("missing.txt") + ": no such file")) << missing.err;
  EXPECT_FALSE(fs::exists(dir_ / "never"));

  testing::write_bytes(dir_ / "tiny.txt", "too short");
  args[3] = path("tiny.txt");
  const testing::CliRun tiny = run_ssm(args);
  EXPECT_EQ(tiny.code, 1);
  EXPECT_TRUE(contains(tiny.err, "--data " + path("tiny.txt"))) << tiny.err;
  EXPECT_FALSE(fs::exists(dir_ / "never"));
}

TEST_F(TrainSafety, WarmupLongerThanTheRunIsWarnedAbout) {
  auto args = train({"--out", path("w")});
  *(std::find(args.begin(), args.end(), "--warmup") + 1) = "5";
  const testing::CliRun r = run_ssm(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "ssm: warning: --warmup 5 is not shorter than the run (--steps 2)")) << r.err;
  const testing::CliRun fine = run_ssm(train({"--out", path("f")}));
  EXPECT_FALSE(contains(fine.err, "warning")) << fine.err;
}

TEST_F(TrainSafety, NoHoldoutTrainsWithoutEvaluation) {
  const testing::CliRun r = run_ssm(train({"--out", path("h"), "--holdout", "0"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, " 0 held-out tokens")) << r.out;
  EXPECT_FALSE(contains(r.out, "held-out loss")) << r.out;
  EXPECT_EQ(run_ssm(train({"--out", path("e"), "--holdout", "0", "--eval-every", "1"})).code, 2);
}

}  // namespace
}  // namespace ssm
