// Backward of y[M, N] = x[M, K] @ W[N, K]^T + bias[N] (ops::linear).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct LinearBackwardArgs {
  int64_t M = 0, K = 0, N = 0;
  const float* x = nullptr;  // (M, K), row stride ldx (0: K)
  int64_t ldx = 0;
  const float* W = nullptr;  // (N, K)
  const float* dy = nullptr;  // (M, N), row stride lddy (0: N)
  int64_t lddy = 0;
  // Any output may be null (not wanted). dx is overwritten unless
  // accumulate_dx; dW and dbias are always accumulated into.
  float* dx = nullptr;  // (M, K), row stride lddx (0: K)
  int64_t lddx = 0;
  bool accumulate_dx = false;
  float* dW = nullptr;     // (N, K)
  float* dbias = nullptr;  // (N)
};

// dx = dy @ W, dW += dy^T @ x, dbias += column sums of dy. Work is split by
// fixed blocks (rows of dx, rows of dW), so results do not depend on the
// thread count.
void linear_backward(const LinearBackwardArgs& a, ThreadPool& pool);

}  // namespace ssm::ops
