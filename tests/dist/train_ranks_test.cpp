// `ssm train` as several CPU processes: --gpus N with --backend cpu trains
// exactly as one process on the same global batch; a rank killed mid-run
// stops the run with an error naming it (under the local launcher and
// under an outside launcher); a rank that never arrives, a malformed
// launch environment and a refused combination are clear errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <regex>
#include <thread>

#include "ssm/core/error.h"
#include "ssm/dist/local_launch.h"
#include "support/cli.h"
#include "support/train_log.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::CliProcess;
using testing::contains;
using namespace std::chrono_literals;

class TrainRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "config.json") << R"({"d_model": 32, "n_layer": 2, "vocab_size": 256,
      "pad_vocab_size_multiple": 8, "d_intermediate": 64, "attn_layer_idx": [], "attn_cfg": {},
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 16},
      "tie_embeddings": true})";
    std::ofstream text(dir_ / "data.txt");
    for (int i = 0; i < 400; ++i)
      text << "line " << i % 37 << ": the quick brown fox jumps over the lazy dog.\n";
    ASSERT_EQ(testing::run_ssm(
                  {"init", "--config", path("config.json"), "--out", path("base"), "--seed", "3"})
                  .code,
              0);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::vector<std::string> train(const std::string& out, int batch, int steps,
                                 std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"train",          path("base"),
                                     "--data",         path("data.txt"),
                                     "--out",          path(out),
                                     "--steps",        std::to_string(steps),
                                     "--batch",        std::to_string(batch),
                                     "--seq-len",      "32",
                                     "--lr",           "3e-3",
                                     "--warmup",       "2",
                                     "--log-every",    "1",
                                     "--threads",      "1",
                                     "--seed",         "7",
                                     "--accumulation", "2",
                                     "--bucket-mb",    "0.01"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // "step N/M loss X" lines: step -> loss.
  testing::TempDir dir_;
};

// Sets environment variables for the processes started while it lives.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// Waits (bounded) until the process's stream holds text; false on timeout.
template <typename Read>
bool wait_for(Read read, const std::string& text, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!contains(read(), text)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// Waits (bounded) for the process to end; its result, or code -1 on timeout.
testing::CliRun finish_within(CliProcess& p, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!p.exited()) {
    if (std::chrono::steady_clock::now() > deadline) return {-1, p.out(), p.err()};
    std::this_thread::sleep_for(20ms);
  }
  return p.wait();
}

TEST_F(TrainRanks, ThreeCpuRanksTrainAsOneProcessOnTheSameGlobalBatch) {
  const auto one = testing::run_ssm(train("one", 6, 5));
  ASSERT_EQ(one.code, 0) << one.err;
  const auto three = testing::run_ssm(train("three", 2, 5, {"--gpus", "3", "--backend", "cpu"}));
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_TRUE(contains(three.out, "steps of 6 x 32 x 2")) << three.out;
  const auto want = testing::step_losses(one.out), got = testing::step_losses(three.out);
  ASSERT_EQ(want.size(), 5u) << one.out;
  ASSERT_EQ(got.size(), 5u) << three.out;
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * loss) << "step " << step;
  // Rank 0 alone speaks and writes: one "done" line, a checkpoint in place.
  EXPECT_EQ(std::count(three.out.begin(), three.out.end(), '\n'),
            std::count(one.out.begin(), one.out.end(), '\n'));
  EXPECT_TRUE(fs::exists(dir_ / "three" / "checkpoint.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "three" / "model.safetensors"));
  // Each checkpoint write is atomic: no temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir_ / "three"))
    EXPECT_TRUE(e.path().extension() != ".tmp" && !contains(e.path().filename().string(), ".tmp"))
        << e.path();
}

TEST_F(TrainRanks, StoppedRunResumesAsIfUninterrupted) {
  const std::vector<std::string> two = {"--gpus", "2", "--backend", "cpu"};
  const auto whole = testing::run_ssm(train("whole", 2, 6, two));
  ASSERT_EQ(whole.code, 0) << whole.err;
  auto first = two;
  first.insert(first.end(), {"--stop-at", "3"});
  const auto cut = testing::run_ssm(train("cut", 2, 6, first));
  ASSERT_EQ(cut.code, 0) << cut.err;
  auto again = two;
  again.push_back("--resume");
  const auto rest = testing::run_ssm(train("cut", 2, 6, again));
  ASSERT_EQ(rest.code, 0) << rest.err;
  const auto want = testing::step_losses(whole.out), got = testing::step_losses(rest.out);
  ASSERT_EQ(got.size(), 3u) << rest.out;
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
  // Another number of ranks is another global batch: refused.
  const auto three =
      testing::run_ssm(train("cut", 2, 6, {"--gpus", "3", "--backend", "cpu", "--resume"}));
  EXPECT_NE(three.code, 0);
  EXPECT_TRUE(contains(three.err, "\"world\":2")) << three.err;
}

TEST_F(TrainRanks, CtrlCStopsEveryRankAtOneStepAndRankZeroSaves) {
  CliProcess run(train("ctrlc", 2, 1000000, {"--gpus", "2", "--backend", "cpu"}));
  ASSERT_TRUE(wait_for([&] { return run.out(); }, "step 2/")) << run.err();
  run.signal(SIGINT);
  const auto r = finish_within(run, 60s);
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_TRUE(contains(r.out, "interrupted: checkpoint at step")) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "ctrlc" / "checkpoint.safetensors"));
}

TEST_F(TrainRanks, KilledRankStopsTheLaunchNamingIt) {
  CliProcess run(train("killed", 2, 1000000, {"--gpus", "3", "--backend", "cpu"}));
  ASSERT_TRUE(wait_for([&] { return run.out(); }, "step 1/")) << run.err();
  std::smatch m;
  const std::string err = run.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("started rank 2 \\(pid ([0-9]+)\\)"))) << err;
  const pid_t victim = std::stoi(m[1]);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto r = finish_within(run, 30s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, cat("rank 2 of 3 (pid ", victim, ") was killed by signal 9")))
      << r.err;
}

TEST_F(TrainRanks, KilledRankUnderAnOutsideLauncherIsNamedByTheOthers) {
  const int port = dist::free_port();
  std::vector<std::unique_ptr<CliProcess>> ranks;
  for (int r = 0; r < 3; ++r) {
    ScopedEnv env({{"RANK", std::to_string(r)},
                   {"WORLD_SIZE", "3"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(port)}});
    ranks.push_back(
        std::make_unique<CliProcess>(train("outside", 2, 1000000, {"--backend", "cpu"})));
  }
  ASSERT_TRUE(wait_for([&] { return ranks[0]->out(); }, "step 1/")) << ranks[0]->err();
  ranks[1]->signal(SIGKILL);
  for (int r : {0, 2}) {
    const auto res = finish_within(*ranks[r], 30s);
    EXPECT_EQ(res.code, 1) << "rank " << r << ": " << res.err;
    EXPECT_TRUE(contains(res.err, "rank 1 of 3 exited or lost its connection"))
        << "rank " << r << ": " << res.err;
  }
}

TEST_F(TrainRanks, RankThatNeverArrivesIsNamedAfterTheTimeout) {
  ScopedEnv env({{"RANK", "0"},
                 {"WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(dist::free_port())}});
  CliProcess rank0(train("alone", 2, 4, {"--rendezvous-timeout", "1"}));
  const auto r = finish_within(rank0, 30s);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 of 2 did not arrive")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "alone" / "checkpoint.safetensors"));
}

TEST_F(TrainRanks, MalformedLaunchEnvironmentIsNamed) {
  ScopedEnv env(
      {{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  const auto r = testing::run_ssm(train("bad", 2, 4));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "RANK='2' is not a whole number in [0, 1]")) << r.err;
}

TEST_F(TrainRanks, Bf16ReductionOnTheCpuIsRefusedBeforeAnythingStarts) {
  const auto r = testing::run_ssm(train("bf16", 2, 4, {"--gpus", "2", "--reduce-dtype", "bf16"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--reduce-dtype bf16")) << r.err;
  EXPECT_FALSE(contains(r.err, "started rank")) << r.err;
}

}  // namespace
}  // namespace ssm
