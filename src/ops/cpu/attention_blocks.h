// What the cpu attention forward and backward share: queries go in blocks of
// kQueryBlock rows, each block's (queries x keys) scores formed by one matrix
// product in a workspace of its thread's own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ssm/core/thread_pool.h"

namespace ssm::cpu {

inline constexpr int64_t kQueryBlock = 64;

// Softmax over the first n entries of row, zeroing the rest up to width.
inline void softmax_prefix(float* row, int64_t n, int64_t width) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - mx);
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  std::fill(row + n, row + width, 0.f);
}

// How many workspaces a loop over n tasks needs: one per thread that runs.
inline int64_t chunk_count(const ThreadPool& pool, int64_t n) {
  return std::min<int64_t>(pool.size(), n);
}

// fn(chunk, begin, end) over chunk_count(pool, n) contiguous ranges covering
// [0, n), split as parallel_for splits, each on its own thread, so that
// chunk indexes a workspace no other thread touches.
template <typename Fn>
void for_each_chunk(ThreadPool& pool, int64_t n, Fn&& fn) {
  const int64_t chunks = chunk_count(pool, n);
  if (chunks == 0) return;
  pool.parallel_for(chunks, [&](int64_t c0, int64_t c1) {
    const int64_t base = n / chunks, extra = n % chunks;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = c * base + std::min(c, extra);
      fn(c, begin, begin + base + (c < extra ? 1 : 0));
    }
  });
}

}  // namespace ssm::cpu
