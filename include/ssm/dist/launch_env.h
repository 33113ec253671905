// The environment a data-parallel process is started in, by the torchrun
// conventions (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so
// that torchrun, SLURM's srun (with those set) or `ssm train --gpus N` can
// start the same program.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace ssm::dist {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
};

// Looks a variable up: nullopt when unset. The process environment by default.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> process_env(const std::string& name);

// nullopt when none of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT is set (a
// single process). ssm::Error naming the variable when only some are set or
// a value is malformed or out of range (RANK >= WORLD_SIZE, a port outside
// 1..65535). LOCAL_RANK defaults to RANK (one host).
std::optional<LaunchEnv> read_launch_env(const EnvLookup& env = process_env);

// The CUDA_VISIBLE_DEVICES value that shows a process only its local GPU:
// the local_rank-th entry of the current list (visible, when set and not
// empty), else local_rank itself. ssm::Error when the list is too short.
std::string visible_device_for(int local_rank, const std::optional<std::string>& visible);

}  // namespace ssm::dist
