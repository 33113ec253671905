// Token streams for training and scoring: a held-out split, seeded random
// windows for training batches (the generator's state is the data position
// a checkpoint keeps), and fixed windows for held-out evaluation.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm {

struct TokenSplit {
  std::vector<int32_t> train, held_out;
};

// The last holdout_fraction of the stream is held out (at least one window
// of `length` + 1 tokens on each side, else ssm::Error naming `what`).
TokenSplit split_tokens(std::vector<int32_t> tokens, double holdout_fraction, int64_t length,
                        const std::string& what);

// FNV-1a over the ids: lets a checkpoint refuse to resume on other data.
uint64_t token_fingerprint(const std::vector<int32_t>& tokens);

class BatchSampler {
 public:
  // Windows of `length` tokens starting anywhere in tokens (kept by pointer).
  // Data parallel: every rank draws the same global batch of batch * world
  // windows and keeps rows [rank * batch, (rank + 1) * batch) of it: its
  // own shard, disjoint from the others', and together the batch a single
  // process with batch * world rows draws.
  BatchSampler(const std::vector<int32_t>& tokens, int64_t batch, int64_t length, uint64_t seed,
               int64_t rank = 0, int64_t world = 1);
  // (batch, length) I64.
  Tensor next();
  // The generator's state as text, and back (ssm::Error when malformed).
  std::string state() const;
  void restore(const std::string& state);

 private:
  const std::vector<int32_t>* tokens_;
  int64_t batch_, length_, rank_, world_;
  std::mt19937_64 rng_;
};

// Consecutive non-overlapping windows of `length` covering at most
// max_tokens of tokens, grouped `batch` rows at a time (the last may be
// smaller).
std::vector<Tensor> fixed_windows(const std::vector<int32_t>& tokens, int64_t batch, int64_t length,
                                  int64_t max_tokens);

}  // namespace ssm
