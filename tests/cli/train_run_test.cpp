// `ssm init` + `ssm train` + `ssm score` end to end: the loss curve of an
// interrupted and resumed run (by --stop-at and by Ctrl-C) equals that of an
// uninterrupted one, and a killed (truncated) or malformed checkpoint is
// refused with a clear error.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "support/cli.h"
#include "support/train_log.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

using testing::CliProcess;
using testing::CliRun;
using testing::run_ssm;
using testing::slurp_file;

class TrainCliRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / cat("ssm_train_cli_", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << R"({"d_model": 32, "n_layer": 2, "vocab_size": 256,
      "pad_vocab_size_multiple": 8, "d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {},
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 16},
      "tie_embeddings": true})";
    std::ofstream text(dir_ / "data.txt");
    for (int i = 0; i < 400; ++i) text << "line " << i % 37 << ": the quick brown fox jumps over the lazy dog.\n";
    ASSERT_EQ(run_ssm({"init", "--config", (dir_ / "config.json").string(), "--out", model("base"), "--seed", "3"}).code, 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string model(const std::string& name) { return (dir_ / name).string(); }

  std::vector<std::string> train_args(const std::string& out,
                                      std::initializer_list<std::string> more = {}) {
    std::vector<std::string> args = {
        "train", model("base"), "--data", (dir_ / "data.txt").string(), "--out", out, "--steps", "8",
        "--batch", "2", "--seq-len", "32", "--lr", "3e-3", "--warmup", "2", "--log-every", "1",
        "--threads", "2", "--seed", "7"};
    args.insert(args.end(), more);
    return args;
  }

  fs::path dir_;
};

TEST_F(TrainCliRun, ResumedRunReproducesTheUninterruptedLossCurve) {
  const CliRun full = run_ssm(train_args(model("full")));
  ASSERT_EQ(full.code, 0) << full.err;
  const auto expected = testing::printed_step_losses(full.out);
  ASSERT_EQ(expected.size(), 8u) << full.out;
  EXPECT_LT(std::stod(expected.at(8)), std::stod(expected.at(1)));

  const CliRun first = run_ssm(train_args(model("split"), {"--stop-at", "3"}));
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("stopped at step 3"), std::string::npos) << first.out;
  const CliRun rest = run_ssm(train_args(model("split"), {"--resume"}));
  ASSERT_EQ(rest.code, 0) << rest.err;
  auto got = testing::printed_step_losses(first.out);
  for (const auto& [step, loss] : testing::printed_step_losses(rest.out)) got[step] = loss;
  EXPECT_EQ(got, expected);
  EXPECT_EQ(slurp_file(dir_ / "split" / "model.safetensors"), slurp_file(dir_ / "full" / "model.safetensors"));

  const CliRun score = run_ssm({"score", model("full"), "--data", (dir_ / "data.txt").string(), "--seq-len", "32"});
  ASSERT_EQ(score.code, 0) << score.err;
  EXPECT_NE(score.out.find("bits per byte:"), std::string::npos) << score.out;
}

TEST_F(TrainCliRun, ResumeWithOtherOptionsIsRefused) {
  ASSERT_EQ(run_ssm(train_args(model("m"), {"--stop-at", "2"})).code, 0);
  const CliRun r = run_ssm(train_args(model("m"), {"--resume", "--lr", "1e-2"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--lr"), std::string::npos) << r.err;
}

TEST_F(TrainCliRun, CtrlCSavesACheckpointThatResumesExactly) {
  const CliRun full = run_ssm(train_args(model("full")));
  ASSERT_EQ(full.code, 0) << full.err;

  // Start a run (slowed by a checkpoint every step), wait for its first
  // step, interrupt it.
  CliProcess proc(train_args(model("int"), {"--checkpoint-every", "1"}));
  for (int i = 0; i < 600 && testing::printed_step_losses(proc.out()).empty(); ++i) ::usleep(10000);
  proc.signal(SIGINT);
  const CliRun stopped = proc.wait();
  const std::string out = stopped.out;
  if (stopped.code == 0) GTEST_SKIP() << "the run ended before the signal";
  EXPECT_EQ(stopped.code, 130) << stopped.err;
  EXPECT_NE(out.find("interrupted: checkpoint at step"), std::string::npos) << out;

  const CliRun rest = run_ssm(train_args(model("int"), {"--resume"}));
  ASSERT_EQ(rest.code, 0) << rest.err;
  auto got = testing::printed_step_losses(out);
  for (const auto& [step, loss] : testing::printed_step_losses(rest.out)) got[step] = loss;
  EXPECT_EQ(got, testing::printed_step_losses(full.out));
}

TEST_F(TrainCliRun, TruncatedOrMalformedCheckpointIsRefused) {
  ASSERT_EQ(run_ssm(train_args(model("m"), {"--stop-at", "2"})).code, 0);
  const fs::path ckpt = dir_ / "m" / "checkpoint.safetensors";
  const std::string bytes = slurp_file(ckpt);
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 100), bytes.substr(0, 20),
                                 std::string("{not a checkpoint}")}) {
    std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << bad;
    const CliRun r = run_ssm(train_args(model("m"), {"--resume"}));
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("ssm: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("checkpoint.safetensors"), std::string::npos) << r.err;
  }
  fs::remove(ckpt);
  const CliRun none = run_ssm(train_args(model("m"), {"--resume"}));
  EXPECT_NE(none.err.find("no checkpoint to resume from"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace ssm
