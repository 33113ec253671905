// Writing to a full disk: a child process capped by RLIMIT_FSIZE (SIGXFSZ
// ignored, so writes fail with EFBIG as on a full file system) overwrites an
// existing file through each writer. Every time the writer reports an
// ssm::Error naming the file and the cause, the old file is intact and no
// temp file is left behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "process.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/safetensors.h"
#include "support/compare.h"
#include "support/mamba1_config.h"
#include "support/temp_dir.h"
#include "writers.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

ChildResult write_capped(rlim_t max_file_bytes, const std::function<void()>& write) {
  return run_in_child([&](int fd) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write();
      report(fd, "the write succeeded");
      return 1;
    } catch (const Error& e) {
      report(fd, e.what());
      return 0;
    }
  });
}

void expect_clean_failure(const ChildResult& r, const fs::path& file) {
  EXPECT_EQ(r.code, 0) << r.message;
  EXPECT_NE(r.message.find(file.string()), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("write failed: File too large"), std::string::npos) << r.message;
}

// Only the expected files remain: no temp file of any write.
void expect_only(const fs::path& dir, std::set<std::string> names) {
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) found.insert(e.path().filename().string());
  EXPECT_EQ(found, names);
}

TEST(FullDisk, WriteFileAtomically) {
  TempDir dir;
  const fs::path dest = dir / "data.bin";
  write_file_atomically(dest, [](FileWriter& w) { w.write("old contents"); });
  const std::string big(1 << 20, 'x');
  expect_clean_failure(write_capped(64 << 10, [&] {
                         write_file_atomically(dest, [&](FileWriter& w) { w.write(big); });
                       }),
                       dest);
  EXPECT_EQ(read_file(dest), "old contents");
  expect_only(dir.path(), {"data.bin"});
}

TEST(FullDisk, Safetensors) {
  TempDir dir;
  const fs::path dest = dir / "model.safetensors";
  save_safetensors(dest, {{"w", Tensor::zeros(DType::kF32, {4})}});
  const std::string old = read_file(dest);
  const Tensor big = Tensor::zeros(DType::kF32, {1 << 18});
  expect_clean_failure(write_capped(64 << 10, [&] { save_safetensors(dest, {{"w", big}}); }), dest);
  EXPECT_EQ(read_file(dest), old);
  EXPECT_EQ(SafetensorsFile::open(dest).get("w").numel(), 4);
  expect_only(dir.path(), {"model.safetensors"});
}

TEST(FullDisk, StateFile) {
  TempDir dir;
  Context ctx(1);
  LanguageModel model = hybrid_model();
  SessionState short_session = session_after(model, 3, ctx), long_session = session_after(model, 40, ctx);
  const fs::path dest = dir / "session.state";
  save_state(dest, short_session, kFingerprint);
  const std::string old = read_file(dest);
  // Room for the old file's size, not for the longer KV caches.
  expect_clean_failure(write_capped(old.size() + 16, [&] { save_state(dest, long_session, kFingerprint); }),
                       dest);
  EXPECT_EQ(read_file(dest), old);
  EXPECT_EQ(load_state(dest, model, kFingerprint).consumed[0], 3);
  expect_only(dir.path(), {"session.state"});
}

TEST(FullDisk, TrainingCheckpoint) {
  TempDir dir, ref;
  TwoTrainers tt;
  tt.a->save_checkpoint(dir.path());
  tt.b->save_checkpoint(ref.path());
  const std::string old_model = read_file(dir / "model.safetensors");
  const std::string old_ckpt = read_file(dir / "checkpoint.safetensors");
  // The disk fills at the first file...
  expect_clean_failure(write_capped(4096, [&] { tt.b->save_checkpoint(dir.path()); }), dir / "model.safetensors");
  EXPECT_EQ(read_file(dir / "model.safetensors"), old_model);
  EXPECT_EQ(read_file(dir / "checkpoint.safetensors"), old_ckpt);
  // ... or between the two: each file is still complete, and the checkpoint,
  // the one resuming reads, is the old one whole.
  expect_clean_failure(write_capped(old_model.size() + 64, [&] { tt.b->save_checkpoint(dir.path()); }),
                       dir / "checkpoint.safetensors");
  EXPECT_EQ(read_file(dir / "model.safetensors"), read_file(ref / "model.safetensors"));
  EXPECT_EQ(read_file(dir / "checkpoint.safetensors"), old_ckpt);
  LanguageModel m = tiny_model(1);
  Trainer resumed(m, tt.tokens, tt.options, tt.ctx);
  resumed.load_checkpoint(dir / "checkpoint.safetensors");
  EXPECT_EQ(resumed.steps_done(), 0);
  expect_only(dir.path(), {"model.safetensors", "checkpoint.safetensors"});
}

TEST(FullDisk, ConvertCommand) {
  TempDir dir, out;
  const fs::path log = dir / "log";
  ASSERT_EQ(reap(spawn_program({SSM_CLI_PATH, "convert", golden_dir("mamba2_ssm_tiny"), out.path().string()},
                               log.string())),
            0)
      << read_file(log);
  const std::string old = read_file(out / "model.safetensors");
  const int code = reap(spawn_program(
      {SSM_CLI_PATH, "convert", "--force", golden_dir("mamba3_siso_bin"), out.path().string()}, log.string(), 64 << 10));
  const std::string message = read_file(log);
  EXPECT_EQ(code, 1) << message;
  EXPECT_NE(message.find("ssm: error: "), std::string::npos) << message;
  EXPECT_NE(message.find("write failed: File too large"), std::string::npos) << message;
  EXPECT_EQ(read_file(out / "model.safetensors"), old);
  expect_only(out.path(), {"model.safetensors", "config.json"});
}

// ssm init over an earlier model, its shards refused by the disk: the
// earlier model's files are untouched and no shard, index or temp file of
// the new one is left.
TEST(FullDisk, InitCommand) {
  TempDir dir, out;
  const fs::path log = dir / "log", config = dir / "config.json";
  write_bytes(config, mamba1_hf_config({.hidden = 128, .layers = 4, .vocab = 1024}));
  ASSERT_EQ(reap(spawn_program({SSM_CLI_PATH, "init", "--config", config.string(), "--out", out.path().string()},
                               log.string())),
            0)
      << read_file(log);
  const std::string old = read_file(out / "model.safetensors");
  const int code = reap(spawn_program({SSM_CLI_PATH, "init", "--force", "--config", config.string(), "--out",
                                       out.path().string(), "--dtype", "bf16", "--shard-size", "1M", "--seed", "2"},
                                      log.string(), 256 << 10));
  const std::string message = read_file(log);
  EXPECT_EQ(code, 1) << message;
  EXPECT_NE(message.find("ssm: error: "), std::string::npos) << message;
  EXPECT_NE(message.find("write failed: File too large"), std::string::npos) << message;
  EXPECT_EQ(read_file(out / "model.safetensors"), old);
  expect_only(out.path(), {"model.safetensors", "config.json"});
}

}  // namespace
}  // namespace ssm::testing
