// Several processes of a test, each one rank: forked from the test, each
// runs a function with its launch environment and reports its exit code and
// its error message (if it threw), within a bounded time.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/dist/launch_env.h"
#include "ssm/dist/local_launch.h"
#include "support/temp_dir.h"

namespace ssm::testing {

struct RankResult {
  int code = -1;  // exit code; 128 + signal; -1 when it had to be killed
  std::string error;
};

// fn's return value is the rank's exit code; an exception is exit code 1
// with its message kept. Ranks not in `start` are never started (a rank
// that does not arrive).
inline std::string slurp_or_empty(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline std::vector<RankResult> run_ranks(int n,
                                         const std::function<int(const dist::LaunchEnv&)>& fn,
                                         std::set<int> start = {},
                                         std::chrono::seconds limit = std::chrono::seconds(60)) {
  TempDir dir;
  const int port = dist::free_port();
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    if (!start.empty() && !start.count(r)) continue;
    pids[r] = ::fork();
    if (pids[r] == 0) {
      int code = 1;
      try {
        code = fn(dist::LaunchEnv{.rank = r,
                                  .world_size = n,
                                  .local_rank = r,
                                  .master_addr = "127.0.0.1",
                                  .master_port = port});
      } catch (const std::exception& e) {
        write_bytes(dir / std::to_string(r), e.what());
      }
      ::_exit(code);
    }
  }
  std::vector<RankResult> out(n);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < n; ++r) {
    if (pids[r] < 0) continue;
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status, 0);
        status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    out[r].code = status == -1        ? -1
                  : WIFEXITED(status) ? WEXITSTATUS(status)
                                      : 128 + WTERMSIG(status);
    out[r].error = slurp_or_empty(dir / std::to_string(r));
  }
  return out;
}

}  // namespace ssm::testing
