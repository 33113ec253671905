// Crash safety: a process writing a session state file, a training
// checkpoint or a converted model is SIGKILLed at random moments, over and
// over; every time, each destination holds a complete old or new version
// (never a mix) that its reader accepts, and temp files of interrupted
// writes are reported and removed. The *Slow tests run 1000 kills each.
#include <gtest/gtest.h>

#include <filesystem>

#include "kill_harness.h"
#include "ssm/io/safetensors.h"
#include "support/compare.h"
#include "support/temp_dir.h"
#include "writers.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

// Kills land anywhere in the first ~1.2 write cycles (one cycle writes both
// versions) of the child once it runs, or its first 20 ms when writes are
// faster.
int64_t max_delay_us(double cycle_seconds) {
  return std::max<int64_t>(static_cast<int64_t>(1.2e6 * cycle_seconds), 20000);
}

// The forked writer can be slower than the parent that timed the cycle
// (its first writes to memory copy pages; under ASan its shadow too): while
// no write has got through, every 20 kills widen the window.
void widen_until_a_write_lands(const KillHarness& harness, int trial, int64_t& max_us) {
  if (trial % 20 == 19 && harness.stats().changed == 0) max_us *= 2;
}

void state_file_kills(int trials) {
  TempDir dir;
  Context ctx(1);
  LanguageModel model = hybrid_model();
  std::vector<SessionState> sessions;
  sessions.push_back(session_after(model, 7, ctx));
  sessions.push_back(session_after(model, 12, ctx));
  const fs::path dest = dir / "session.state";
  std::vector<std::string> versions;
  for (SessionState& s : sessions) {
    save_state(dest, s, kFingerprint);
    versions.push_back(read_file(dest));
  }
  ASSERT_NE(versions[0], versions[1]);
  const double cycle = time_of([&] {
    for (SessionState& s : sessions) save_state(dest, s, kFingerprint);
  });

  KillHarness harness({{dest, versions, [&](const fs::path& p) { (void)load_state(p, model, kFingerprint); }}});
  std::mt19937_64 rng(KillHarness::seed());
  int64_t max_us = max_delay_us(cycle);
  for (int t = 0; t < trials; ++t) {
    const pid_t pid = spawn_started([&] {
      for (int i = t;; ++i) save_state(dest, sessions[i % 2], kFingerprint);
      return 0;
    });
    harness.kill_after(pid, random_delay(rng, max_us));
    widen_until_a_write_lands(harness, t, max_us);
  }
  std::printf("%s\n", harness.summary("state file").c_str());
  EXPECT_EQ(harness.stats().corrupted, 0);
  EXPECT_EQ(harness.stats().unreadable, 0);
  EXPECT_GT(harness.stats().mid_write, 0) << "no kill landed inside a write";
  EXPECT_GT(harness.stats().changed, 0) << "the writer never got a write through";
}

void checkpoint_kills(int trials) {
  TempDir dir, ref_a, ref_b;
  TwoTrainers tt;
  tt.a->save_checkpoint(ref_a.path());
  tt.b->save_checkpoint(ref_b.path());
  tt.a->save_checkpoint(dir.path());
  const double cycle = time_of([&] {
    tt.a->save_checkpoint(dir.path());
    tt.b->save_checkpoint(dir.path());
  });
  std::vector<KillHarness::Destination> dests;
  for (const char* f : {"model.safetensors", "checkpoint.safetensors"}) {
    const std::vector<std::string> versions = {read_file(ref_a / f), read_file(ref_b / f)};
    ASSERT_NE(versions[0], versions[1]) << f;
    dests.push_back({dir / f, versions, [](const fs::path& p) { (void)SafetensorsFile::open(p); }});
  }
  // The checkpoint must resume: a fresh trainer takes it.
  dests.back().read = [&](const fs::path& p) {
    LanguageModel m = tiny_model(1);
    Trainer fresh(m, tt.tokens, tt.options, tt.ctx);
    fresh.load_checkpoint(p);
  };
  KillHarness harness(std::move(dests));
  std::mt19937_64 rng(KillHarness::seed() + 1);
  int64_t max_us = max_delay_us(cycle);
  for (int t = 0; t < trials; ++t) {
    const pid_t pid = spawn_started([&] {
      for (int i = t;; ++i) (i % 2 ? tt.b : tt.a)->save_checkpoint(dir.path());
      return 0;
    });
    harness.kill_after(pid, random_delay(rng, max_us));
    widen_until_a_write_lands(harness, t, max_us);
  }
  std::printf("%s\n", harness.summary("training checkpoint").c_str());
  EXPECT_EQ(harness.stats().corrupted, 0);
  EXPECT_EQ(harness.stats().unreadable, 0);
  EXPECT_GT(harness.stats().mid_write, 0) << "no kill landed inside a write";
  EXPECT_GT(harness.stats().changed, 0) << "the writer never got a write through";
}

// Whether a temp file of a write in progress is in dir.
bool writing(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

// `ssm convert` itself, one process per trial, alternating two sources.
void convert_kills(int trials) {
  TempDir dir, ref_a, ref_b;
  const std::string src_a = golden_dir("mamba3_siso_bin"), src_b = golden_dir("mamba2_ssm_tiny");
  const fs::path log = dir / "convert.log", dst = dir / "out";
  auto convert = [&](const std::string& src, const fs::path& to) {
    return spawn_program({SSM_CLI_PATH, "convert", "--force", src, to.string()}, log.string());
  };
  ASSERT_EQ(reap(convert(src_a, ref_a.path())), 0) << read_file(log);
  ASSERT_EQ(reap(convert(src_b, ref_b.path())), 0) << read_file(log);
  const double run = time_of([&] { reap(convert(src_a, dst)); });
  std::vector<KillHarness::Destination> dests;
  for (const char* f : {"model.safetensors", "config.json"}) {
    std::vector<std::string> versions = {read_file(ref_a / f), read_file(ref_b / f)};
    dests.push_back({dst / f, versions, [](const fs::path&) {}});
  }
  ASSERT_NE(dests[0].versions[0], dests[0].versions[1]);
  dests[0].read = [](const fs::path& p) { (void)SafetensorsFile::open(p); };
  dests[1].read = [](const fs::path& p) { (void)load_model_config(p); };
  KillHarness harness(std::move(dests));
  std::mt19937_64 rng(KillHarness::seed() + 2);
  auto max_us = static_cast<int64_t>(1.5e6 * run);
  // Half the kills come at a random moment of the run, which start-up and
  // reading dominate; the other half are aimed at the writes: shortly after
  // a temp file appears.
  for (int t = 0; t < trials; ++t) {
    const auto started = std::chrono::steady_clock::now();
    const pid_t pid = convert(t % 2 ? src_a : src_b, dst);
    if (t % 4 < 2) {
      harness.kill_after(pid, random_delay(rng, max_us));
    } else {
      while (!writing(dst) && std::chrono::steady_clock::now() - started < std::chrono::microseconds(2 * max_us))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      harness.kill_after(pid, random_delay(rng, 800));
    }
    // Under load a conversion can take longer than the one timed first, and
    // every kill land before it completes.
    widen_until_a_write_lands(harness, t, max_us);
  }
  std::printf("%s\n", harness.summary("ssm convert").c_str());
  EXPECT_EQ(harness.stats().corrupted, 0);
  EXPECT_EQ(harness.stats().unreadable, 0);
  EXPECT_GT(harness.stats().mid_write, 0) << "no kill landed inside a write";
  EXPECT_GT(harness.stats().changed, 0) << "no conversion got through";
}

TEST(KillDuringWrite, StateFile) { state_file_kills(100); }
TEST(KillDuringWrite, TrainingCheckpoint) { checkpoint_kills(100); }
TEST(KillDuringWrite, Convert) { convert_kills(100); }

TEST(KillDuringWrite, SlowStateFile) { state_file_kills(1000); }
TEST(KillDuringWrite, SlowTrainingCheckpoint) { checkpoint_kills(1000); }
TEST(KillDuringWrite, SlowConvert) { convert_kills(1000); }

}  // namespace
}  // namespace ssm::testing
