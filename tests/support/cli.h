// Runs the built ssm program as a user would: the arguments as given (no
// shell in between), standard input from a string, stdout and stderr
// captured apart; or started in the background, to be interrupted.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace ssm::testing {

struct CliRun {
  int code = -1;  // the exit code, or 128 + the signal that killed it
  std::string out, err;
};

inline std::string slurp_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A running ssm whose output lands in files of its own temp directory.
class CliProcess {
 public:
  // program: the binary to run (the built one unless given); cwd: where.
  explicit CliProcess(const std::vector<std::string>& args, const std::string& input = "",
                      const std::string& program = SSM_CLI_PATH, const std::string& cwd = "") {
    write_bytes(dir_ / "in", input);
    std::vector<std::string> argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ != 0) return;
    const auto redirect = [](const std::filesystem::path& path, int flags, int fd) {
      const int f = ::open(path.c_str(), flags, 0644);
      ::dup2(f, fd);
      ::close(f);
    };
    redirect(dir_ / "in", O_RDONLY, STDIN_FILENO);
    redirect(dir_ / "out", O_WRONLY | O_CREAT | O_TRUNC, STDOUT_FILENO);
    redirect(dir_ / "err", O_WRONLY | O_CREAT | O_TRUNC, STDERR_FILENO);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ~CliProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  std::string out() const { return slurp_file(dir_ / "out"); }
  std::string err() const { return slurp_file(dir_ / "err"); }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  bool exited() {
    int status = 0;
    if (reaped_ || ::waitpid(pid_, &status, WNOHANG) != pid_) return reaped_;
    reaped_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  // Kills it (SIGKILL) and reaps it.
  CliRun wait_killed() {
    if (!exited()) ::kill(pid_, SIGKILL);
    return wait();
  }
  CliRun wait() {
    if (!reaped_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0) {
      }
      reaped_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return {code_, slurp_file(dir_ / "out"), slurp_file(dir_ / "err")};
  }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = -1;
};

inline CliRun run_ssm(const std::vector<std::string>& args, const std::string& input = "") {
  return CliProcess(args, input).wait();
}

// For a command expected to stop at once (a usage error): run_ssm, but a
// command that runs on instead is killed, not waited for forever, and
// reported with code kStillRunning. It is killed as soon as its stderr shows
// `running` (a server's "listening on": it would serve until stopped), else
// after `limit`. A test whose expectation is wrong then fails, not hangs.
inline constexpr int kStillRunning = -2;
inline CliRun run_ssm_expecting_exit(const std::vector<std::string>& args,
                                     const std::string& running = "listening on",
                                     std::chrono::seconds limit = std::chrono::seconds(300)) {
  CliProcess p(args);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!p.exited()) {
    if (std::chrono::steady_clock::now() > deadline || (!running.empty() && contains(p.err(), running))) {
      CliRun r = p.wait_killed();
      r.code = kStillRunning;
      r.err = "(still running; killed by the test)\n" + r.err;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p.wait();
}


}  // namespace ssm::testing
