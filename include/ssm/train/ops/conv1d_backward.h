// Backward of the causal depthwise convolution with its SiLU (ops/conv1d.h),
// for sequences that start fresh (zero inputs before t=0).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct Conv1dBackwardArgs {
  int64_t batch = 0, length = 0, channels = 0, kernel = 0;  // B, L, C, K
  const float* in = nullptr;  // (B, L, C), row stride ld_in
  int64_t ld_in = 0;
  const float* weight = nullptr;  // (C, 1, K)
  const float* bias = nullptr;    // (C) or null
  bool silu = true;               // the forward applied SiLU after the bias
  const float* dout = nullptr;    // (B, L, C) dense: gradient of the output
  float* din = nullptr;           // (B, L, C) overwritten, row stride ld_din
  int64_t ld_din = 0;
  float* dweight = nullptr;  // (C, 1, K) accumulated, may be null
  float* dbias = nullptr;    // (C) accumulated, may be null
};

// Recomputes the pre-activation where SiLU needs it. Split by channel
// blocks, so sums over batch and time run in a fixed order.
void causal_conv1d_backward(const Conv1dBackwardArgs& a, ThreadPool& pool);

}  // namespace ssm::ops
