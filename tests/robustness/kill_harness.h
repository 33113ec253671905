// Bookkeeping of the kill tests. A writer process is SIGKILLed at a random
// moment; afterwards every destination must equal, byte for byte, one of the
// complete versions that were being written to it and pass its real reader,
// and whatever temp files the killed write left must be found as stale and
// removed with a warning that names them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "ssm/core/log.h"
#include "ssm/io/atomic_file.h"

namespace ssm::testing {

struct KillStats {
  int trials = 0;
  int mid_write = 0;  // kills that left a temp file behind: the process died inside a write
  int changed = 0;    // trials after which a destination held another version than before
  int corrupted = 0;  // destinations holding anything but a complete version (must stay 0)
  int unreadable = 0;  // destinations the real reader refused (must stay 0)
};

class KillHarness {
 public:
  struct Destination {
    std::filesystem::path path;
    std::vector<std::string> versions;  // every complete content it may hold
    std::function<void(const std::filesystem::path&)> read;  // throws on a bad file
  };

  explicit KillHarness(std::vector<Destination> dests)
      : dests_(std::move(dests)), last_(dests_.size(), -1) {
    set_log_sink([this](LogLevel, const std::string& m) { warnings_.push_back(m); });
  }
  ~KillHarness() {
    set_log_sink([](LogLevel, const std::string& m) { std::fprintf(stderr, "ssm: %s\n", m.c_str()); });
  }

  // The seed comes from SSM_KILL_SEED when set, so a failure can be replayed.
  static uint64_t seed() {
    const char* s = std::getenv("SSM_KILL_SEED");
    return s ? std::strtoull(s, nullptr, 10) : 20240611;
  }

  // Kills pid once delay has passed since it was started, then checks.
  void kill_after(pid_t pid, std::chrono::microseconds delay) {
    std::this_thread::sleep_for(delay);
    kill_and_reap(pid);
    check();
  }

  const KillStats& stats() const { return stats_; }

  std::string summary(const std::string& what) const {
    return cat(what, ": ", stats_.trials, " kills, ", stats_.mid_write, " inside a write (temp file left), ",
               stats_.changed, " after a version change, ", stats_.corrupted, " corrupted, ",
               stats_.unreadable, " unreadable");
  }

 private:
  void check() {
    ++stats_.trials;
    bool mid_write = false, changed = false;
    for (size_t d = 0; d < dests_.size(); ++d) {
      const Destination& dest = dests_[d];
      std::string bytes;
      try {
        bytes = read_file(dest.path);
      } catch (const Error& e) {
        ADD_FAILURE() << "trial " << stats_.trials << ": " << e.what();
        ++stats_.corrupted;
        continue;
      }
      const auto it = std::find(dest.versions.begin(), dest.versions.end(), bytes);
      if (it == dest.versions.end()) {
        ++stats_.corrupted;
        ADD_FAILURE() << "trial " << stats_.trials << ": " << dest.path << " holds " << bytes.size()
                      << " bytes matching no complete version";
      } else {
        const int v = static_cast<int>(it - dest.versions.begin());
        changed |= last_[d] >= 0 && last_[d] != v;
        last_[d] = v;
      }
      try {
        dest.read(dest.path);
      } catch (const std::exception& e) {
        ++stats_.unreadable;
        ADD_FAILURE() << "trial " << stats_.trials << ": reader refused " << dest.path << ": " << e.what();
      }
      // The killed writer is reaped, so its temp files are stale; the next
      // write (or this call) removes them, each with a warning.
      const std::vector<std::filesystem::path> stale = stale_temp_files(dest.path);
      mid_write |= !stale.empty();
      warnings_.clear();
      EXPECT_EQ(remove_stale_temp_files(dest.path), stale.size());
      for (const auto& s : stale) {
        const bool named = std::any_of(warnings_.begin(), warnings_.end(), [&](const std::string& w) {
          return w.find(s.filename().string()) != std::string::npos;
        });
        EXPECT_TRUE(named) << "no warning names " << s;
        EXPECT_FALSE(std::filesystem::exists(s));
      }
      EXPECT_TRUE(stale_temp_files(dest.path).empty());
    }
    stats_.mid_write += mid_write;
    stats_.changed += changed;
  }

  std::vector<Destination> dests_;
  std::vector<int> last_;
  std::vector<std::string> warnings_;
  KillStats stats_;
};

// A random delay in [0, max_us] microseconds.
inline std::chrono::microseconds random_delay(std::mt19937_64& rng, int64_t max_us) {
  return std::chrono::microseconds(std::uniform_int_distribution<int64_t>(0, max_us)(rng));
}

// Seconds one call of fn takes (the best of three).
inline double time_of(const std::function<void()>& fn) {
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace ssm::testing
