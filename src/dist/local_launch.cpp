#include "ssm/dist/local_launch.h"

#include <signal.h>
#if !defined(__EMSCRIPTEN__)  // the WebAssembly build links this library but never launches
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "dist/socket.h"
#include "ssm/core/error.h"

extern char** environ;

namespace ssm::dist {
namespace {

constexpr int kInterrupted = 130;  // the program's exit status for a clean stop on Ctrl-C

// The signal the launcher got last (0: none yet), passed on to the ranks.
volatile sig_atomic_t g_forward = 0;
void remember(int sig) { g_forward = sig; }

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return cat("was killed by signal ", sig, " (", ::strsignal(sig), ")");
  }
  return cat("exited with status ", WEXITSTATUS(status));
}

bool failed(int status) {
  return WIFSIGNALED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != kInterrupted);
}

// The child's side of fork: its environment, then the program.
[[noreturn]] void exec_rank(const LocalLaunch& l, int rank, int port) {
#if !defined(__EMSCRIPTEN__)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphan ranks if the launcher dies
#endif
  // A group of its own: a Ctrl-C at the terminal reaches the launcher alone,
  // which passes it on once (twice would kill a rank that is saving).
  ::setpgid(0, 0);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  for (const auto& [k, v] : local_rank_env(rank, l.ranks, port)) ::setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execve(argv[0], argv.data(), environ);
  const std::string m =
      cat("ssm: error: rank ", rank, ": cannot run ", l.argv[0], ": ", std::strerror(errno), "\n");
  (void)!::write(STDERR_FILENO, m.data(), m.size());
  ::_exit(127);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> local_rank_env(int rank, int n, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(n)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(n)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"NCCL_NVLS_ENABLE", "0"}};
}

int free_port() {
  const Socket s = listen_on(0);
  return local_port(s);
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\0', at);
    args.push_back(text.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (args.empty()) throw Error("cannot read this process's command line from /proc/self/cmdline");
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) args[0] = exe.string();
  return args;
}

int run_local_ranks(const LocalLaunch& l) {
  if (l.ranks < 1 || l.argv.empty())
    throw Error("a local launch needs a program and at least one rank");
  const int port = l.master_port > 0 ? l.master_port : free_port();
  std::vector<pid_t> pids(l.ranks, -1);
  std::vector<bool> running(l.ranks, false);
  const auto stop_all = [&] {
    for (int r = 0; r < l.ranks; ++r)
      if (running[r]) ::kill(pids[r], SIGTERM);
    const auto deadline = Clock::now() + l.grace;
    for (int r = 0; r < l.ranks; ++r) {
      while (running[r]) {
        int status = 0;
        const pid_t p = ::waitpid(pids[r], &status, WNOHANG);
        if (p == pids[r] || (p < 0 && errno == ECHILD)) {
          running[r] = false;
        } else if (Clock::now() >= deadline) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], &status, 0);
          running[r] = false;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    }
  };
  for (int r = 0; r < l.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      stop_all();
      throw Error(cat("cannot start rank ", r, ": fork: ", why));
    }
    if (pid == 0) exec_rank(l, r, port);
    pids[r] = pid;
    running[r] = true;
    if (l.on_start) l.on_start(r, pid);
  }
  // Ctrl-C and SIGTERM are passed on to every rank: on Ctrl-C they agree
  // to stop at one step and rank 0 saves.
  g_forward = 0;
  struct sigaction pass {
  }, old_int{}, old_term{};
  pass.sa_handler = remember;
  ::sigaction(SIGINT, &pass, &old_int);
  ::sigaction(SIGTERM, &pass, &old_term);
  const auto restore = [&] {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
  };
  int left = l.ranks, result = 0;
  while (left > 0) {
    if (const int sig = g_forward) {
      g_forward = 0;
      for (int r = 0; r < l.ranks; ++r)
        if (running[r]) ::kill(pids[r], sig);
    }
    int status = 0;
    const pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p == 0 || (p < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (p < 0) break;  // no children left
    int r = 0;
    while (r < l.ranks && !(running[r] && pids[r] == p)) ++r;
    if (r == l.ranks) continue;  // not one of ours
    running[r] = false;
    --left;
    if (failed(status)) {
      // A rank that dies takes the others down with it as they notice, so
      // several may have ended by the time we look; the first one reaped is
      // not necessarily the cause. Let the rest settle briefly and name a
      // rank killed by a signal ahead of one that exited with an error.
      int culprit = r, culprit_status = status;
      const auto settle = Clock::now() + std::chrono::milliseconds(200);
      while (!WIFSIGNALED(culprit_status) && Clock::now() < settle) {
        for (int o = 0; o < l.ranks; ++o) {
          int s = 0;
          if (!running[o] || ::waitpid(pids[o], &s, WNOHANG) != pids[o]) continue;
          running[o] = false;
          if (WIFSIGNALED(s)) culprit = o, culprit_status = s;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      stop_all();
      restore();
      throw Error(cat("rank ", culprit, " of ", l.ranks, " (pid ", pids[culprit], ") ",
                      describe(culprit_status), "; stopped the other ranks"));
    }
    if (WEXITSTATUS(status) == kInterrupted) result = kInterrupted;
  }
  restore();
  return result;
}

}  // namespace ssm::dist
