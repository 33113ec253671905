// The processes of one data-parallel run, joined over TCP: rank 0 listens
// at MASTER_ADDR:MASTER_PORT, every other rank connects to it, and rank 0
// hands them a blob (the NCCL unique id). The connections stay open for
// the run: they carry the small per-step collectives (the loss, the stop
// flag) and, on the CPU backend, the gradients themselves; and a rank
// that dies closes its connection, so the others stop with an error naming
// it instead of waiting forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ssm/dist/launch_env.h"

namespace ssm::dist {

class Socket;

class Group {
 public:
  // Joins the run env describes. Rank 0 sends blob to the others; they
  // receive it into blob. ssm::Error when the ranks have not all arrived
  // within timeout: rank 0's names the missing ranks, and rank 0 tells the
  // ranks that did arrive.
  static Group rendezvous(const LaunchEnv& env, std::string& blob,
                          std::chrono::milliseconds timeout);
  // A group of one (no sockets): the collectives are identities.
  static Group single();

  Group(Group&&) noexcept;
  Group& operator=(Group&&) noexcept;
  ~Group();

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Element-wise sum over the ranks, added in rank order on rank 0, so that
  // every rank gets the same bits. ssm::Error naming the rank when one has
  // gone (every rank still running gets it).
  void all_reduce_sum(double* data, size_t n);
  // The mean over the ranks (the sum in rank order, times 1 / size).
  void all_reduce_mean(float* data, size_t n);

 private:
  Group() = default;
  template <typename T>
  void reduce(T* data, size_t n, bool mean);
  [[noreturn]] void fail(const std::string& message);

  int rank_ = 0, size_ = 1;
  std::string where_;  // MASTER_ADDR:MASTER_PORT, for messages
  // Rank 0: one connection per rank (index 0 unused); others: [0] is rank 0.
  std::vector<std::unique_ptr<Socket>> peers_;
};

}  // namespace ssm::dist
