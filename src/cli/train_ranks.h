// The data-parallel side of `ssm train`: --gpus N starts N ranks of the
// same command (dist::run_local_ranks); a process started with the torchrun
// variables joins its run (the rendezvous), and its trainer reduces
// gradients over the ranks (NCCL on a GPU, the rendezvous connections on
// the CPU).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "ssm/dist/group.h"
#include "ssm/train/trainer.h"

namespace ssm::cli {

struct DataParallelArgs {
  int gpus = 0;  // 0: as the environment says (one process without torchrun's variables)
  std::string reduce_dtype = "f32";
  double bucket_mb = 25;
  double rendezvous_timeout = 300;  // seconds
};

void add_data_parallel_options(CLI::App& cmd, DataParallelArgs& args);

// --gpus N in a process that is not a rank yet: runs the N ranks and
// returns their exit status (nullopt: this process is a rank, or alone).
// UsageError for combinations refused before anything starts.
std::optional<int> launch_ranks_if_asked(const DataParallelArgs& args, const std::string& backend);

// One rank of a run.
class Rank {
 public:
  // nullptr when the process is alone (no torchrun variables). Shows a GPU
  // rank only its own GPU (CUDA_VISIBLE_DEVICES): call before any CUDA use.
  static std::unique_ptr<Rank> join(const DataParallelArgs& args, const std::string& backend);

  int rank() const { return group_.rank(); }
  int world() const { return group_.size(); }
  bool root() const { return rank() == 0; }
  // The trainer's gradients and loss go over the ranks from now on.
  void attach(Trainer& trainer, Context& ctx);
  // True on every rank when it is true on any (a Ctrl-C seen by one).
  bool any(bool flag);

 private:
  Rank(dist::Group group, std::string nccl_id, DataParallelArgs args)
      : group_(std::move(group)), nccl_id_(std::move(nccl_id)), args_(std::move(args)) {}
  dist::Group group_;
  std::string nccl_id_;
  DataParallelArgs args_;
  std::unique_ptr<GradientTransport> transport_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace ssm::cli
