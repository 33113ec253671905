// Child processes for the robustness tests: run a function (or a program)
// in a fork, kill it, collect what it reported.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace ssm::testing {

// Forks; the child runs fn and exits with its return value (3 when fn
// throws). Output of the child goes to /dev/null unless keep_output.
inline pid_t spawn(const std::function<int()>& fn, bool keep_output = false) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (!keep_output) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  int rc = 3;
  try {
    rc = fn();
  } catch (...) {
  }
  ::_exit(rc);
}

// spawn, returning once the child is running fn: a delay measured from
// then leaves out the fork, which on a loaded machine (or under ASan, whose
// shadow memory makes fork slow) can take longer than the work timed.
inline pid_t spawn_started(const std::function<int()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return spawn(fn);
  const pid_t pid = spawn([&] {
    ::close(fds[0]);
    const char started = 1;
    (void)!::write(fds[1], &started, 1);
    ::close(fds[1]);
    return fn();
  });
  ::close(fds[1]);
  char started = 0;
  while (::read(fds[0], &started, 1) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  return pid;
}

// Waits for pid; returns its exit code, or 128 + signal when killed.
inline int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline int kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  return reap(pid);
}

// Runs fn in a child and returns {exit code, what the child wrote to the
// pipe it was given}.
struct ChildResult {
  int code = -1;
  std::string message;
};
inline ChildResult run_in_child(const std::function<int(int report_fd)>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = spawn([&] {
    ::close(fds[0]);
    return fn(fds[1]);
  });
  ::close(fds[1]);
  std::string message;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) message.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return {reap(pid), message};
}

inline void report(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Runs a program with arguments in a child (no shell); stdout and stderr go
// to output_file. The child applies limits before exec: a file size cap
// (with SIGXFSZ ignored, so writes fail with EFBIG instead of killing it).
inline pid_t spawn_program(const std::vector<std::string>& argv, const std::string& output_file,
                           rlim_t file_size_limit = RLIM_INFINITY) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int out = ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  if (file_size_limit != RLIM_INFINITY) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{file_size_limit, file_size_limit};
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

}  // namespace ssm::testing
