// `ssm train --gpus N`: N processes of one program on this host, started
// with the torchrun variables set, watched until they end. When one fails
// (a signal, or an exit status other than 0 and 130), the others are
// stopped and the launch fails naming it: a dead rank never leaves the
// others hanging in a collective. Ctrl-C (SIGINT) and SIGTERM sent to the
// launcher are passed on to every rank.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ssm::dist {

struct LocalLaunch {
  std::vector<std::string> argv;  // the program and its arguments, run as is
  int ranks = 1;
  int master_port = 0;  // 0: a free port of this host
  // After SIGTERM, how long the other ranks get before SIGKILL.
  std::chrono::milliseconds grace{3000};
  // Told each rank's process id as it starts.
  std::function<void(int rank, pid_t pid)> on_start;
};

// The variables rank r of n gets on top of the launcher's environment:
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (this host's
// loopback), MASTER_PORT, and NCCL_NVLS_ENABLE=0 (NVLink multicast stays
// off: the GPUs of a shared host must not be put out of service).
std::vector<std::pair<std::string, std::string>> local_rank_env(int rank, int n, int port);

// Runs the ranks; returns 0 when every rank exited 0, 130 when they stopped
// on an interrupt. ssm::Error naming the first rank that failed otherwise
// (the others are stopped first).
int run_local_ranks(const LocalLaunch& launch);

// A TCP port free on this host now.
int free_port();

// This process's own command line (from /proc/self/cmdline) with its
// program replaced by the executable's path (/proc/self/exe).
std::vector<std::string> own_command_line();

}  // namespace ssm::dist
