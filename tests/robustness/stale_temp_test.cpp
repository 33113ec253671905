// Temp files left by interrupted writes (.NAME.tmp.<pid>.XXXXXX): the next
// write of NAME removes those whose writer is gone, with a warning naming
// each, and leaves alone those of live writers and of other files.
#include <gtest/gtest.h>

#include <filesystem>

#include "process.h"
#include "ssm/core/log.h"
#include "ssm/io/atomic_file.h"
#include "support/temp_dir.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

struct CaptureLog {
  std::vector<std::string> lines;
  CaptureLog() {
    set_log_sink([this](LogLevel, const std::string& m) { lines.push_back(m); });
  }
  ~CaptureLog() {
    set_log_sink([](LogLevel, const std::string& m) { std::fprintf(stderr, "ssm: %s\n", m.c_str()); });
  }
  bool mentions(const std::string& s) const {
    for (const auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

void write_text(const fs::path& p, const std::string& text) {
  write_file_atomically(p, [&](FileWriter& w) { w.write(text); });
}

// A pid that belonged to a process which has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = spawn([] { return 0; });
  reap(pid);
  return pid;
}

TEST(StaleTempFiles, NextWriteRemovesLeftoversOfDeadWritersWithAWarning) {
  TempDir dir;
  const fs::path dest = dir / "model.safetensors";
  write_text(dest, "old");
  const fs::path dead = dir / cat(".model.safetensors.tmp.", dead_pid(), ".Xy12Zq");
  const fs::path legacy = dir / ".model.safetensors.tmp.AbC123";  // pid-less name of older builds
  write_bytes(dead, "half a file");
  write_bytes(legacy, "another half");
  EXPECT_EQ(stale_temp_files(dest), (std::vector<fs::path>{dead, legacy}));

  CaptureLog log;
  write_text(dest, "new");
  EXPECT_EQ(read_file(dest), "new");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_TRUE(log.mentions(dead.filename().string())) << (log.lines.empty() ? "" : log.lines[0]);
  EXPECT_TRUE(log.mentions(legacy.filename().string()));
  EXPECT_TRUE(log.mentions("interrupted"));
  EXPECT_TRUE(stale_temp_files(dest).empty());
}

TEST(StaleTempFiles, LiveWritersAndOtherFilesAreLeftAlone) {
  TempDir dir;
  const fs::path dest = dir / "session.state";
  const pid_t live = spawn([] {
    ::pause();
    return 0;
  });
  const std::vector<fs::path> keep = {
      dir / cat(".session.state.tmp.", live, ".aaaaaa"),          // another process, still writing
      dir / cat(".session.state.tmp.", ::getpid(), ".bbbbbb"),    // another thread of this one
      dir / cat(".other.state.tmp.", dead_pid(), ".cccccc"),      // some other destination
      dir / ".session.state.tmpfoo",                              // not a temp name
  };
  for (const fs::path& p : keep) write_bytes(p, "x");
  EXPECT_TRUE(stale_temp_files(dest).empty());
  CaptureLog log;
  write_text(dest, "state");
  for (const fs::path& p : keep) EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_TRUE(log.lines.empty());
  kill_and_reap(live);
  // Once the writer is gone its file is a leftover like any other.
  EXPECT_EQ(stale_temp_files(dest), (std::vector<fs::path>{keep[0]}));
  EXPECT_EQ(remove_stale_temp_files(dest), 1u);
}

TEST(StaleTempFiles, AFailedWriteLeavesNoTempFile) {
  TempDir dir;
  const fs::path dest = dir / "out.bin";
  write_text(dest, "old");
  EXPECT_THROW(write_file_atomically(dest, [](FileWriter& w) {
                 w.write("partial");
                 throw Error("producer failed");
               }),
               Error);
  EXPECT_EQ(read_file(dest), "old");
  for (const auto& e : fs::directory_iterator(dir.path())) EXPECT_EQ(e.path(), dest);
}

}  // namespace
}  // namespace ssm::testing
