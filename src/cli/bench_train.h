// `ssm bench --train`: training steps (forward, backward, gradient-norm
// clip, AdamW) timed on random tokens, for each batch size, against bounds
// measured in the same run: the backend's product rate (bf16 weights on a
// device, the tensor-core rate; F32 on the host) at 6 FLOPs per parameter
// per token, and the device's memory for the peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssm::cli {

struct TrainBenchArgs {
  std::string model;
  std::string backend = "cpu";
  int threads = 1;
  int64_t seq_len = 2048;
  std::vector<int64_t> batches = {1};
  int steps = 5;      // timed, after one warm-up step
  bool bf16 = false;  // products on bf16 tensor cores (cuda)
  bool json = false;
};

int run_train_bench(const TrainBenchArgs& a);

}  // namespace ssm::cli
