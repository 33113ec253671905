// Causal depthwise convolution over time with the SiLU that always follows it
// in Mamba-2, carrying the last K-1 input rows as decode state.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct Conv1dArgs {
  int64_t batch = 0, length = 0, channels = 0, kernel = 0;  // B, L, C, K
  const float* in = nullptr;  // (B, L, C) with row stride ld_in per time step
  int64_t ld_in = 0;
  const float* weight = nullptr;  // (C, 1, K)
  const float* bias = nullptr;    // (C) or null
  // (B, K-1, C): the inputs before t=0 (zeros for a fresh sequence); on
  // return it holds the last K-1 inputs. Null means zeros and no update.
  float* state = nullptr;
  float* out = nullptr;  // (B, L, C) dense
  bool silu = true;
};

void causal_conv1d(const Conv1dArgs& a, ThreadPool& pool);

// One time step of the same convolution for decoding: equal to
// causal_conv1d with length 1 (ld_in is the stride between batch rows), but
// shifting the state in place without any workspace.
struct Conv1dStepArgs {
  int64_t batch = 0, channels = 0, kernel = 0;  // B, C, K
  const float* in = nullptr;  // (B, C) with row stride ld_in
  int64_t ld_in = 0;
  const float* weight = nullptr;  // (C, 1, K)
  const float* bias = nullptr;    // (C) or null
  float* state = nullptr;         // (B, K-1, C): the last K-1 inputs, advanced
  float* out = nullptr;           // (B, C) dense
  bool silu = true;
};

void causal_conv1d_step(const Conv1dStepArgs& a, ThreadPool& pool);

}  // namespace ssm::ops
