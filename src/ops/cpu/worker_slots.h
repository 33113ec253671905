// Per-worker workspace for cpu kernels. The arena may only be used from the
// calling thread, so a kernel takes one slot of scratch per worker from it
// before the parallel loop; parallel_for_slots then hands every worker its
// contiguous range of [0, n) together with the index of its slot. The split
// of [0, n) is ThreadPool::parallel_for's, and no result depends on which slot
// an index runs in.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::cpu {

// How many slots parallel_for_slots(pool, n, ...) uses.
inline int64_t worker_slots(const ThreadPool& pool, int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>(pool.size(), n));
}

// Calls fn(slot, begin, end) over disjoint ranges covering [0, n), slot in
// [0, worker_slots(pool, n)).
template <typename F>
void parallel_for_slots(ThreadPool& pool, int64_t n, F&& fn) {
  const int64_t slots = worker_slots(pool, n);
  pool.parallel_for(slots, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t base = n / slots, extra = n % slots;
      const int64_t begin = s * base + std::min(s, extra);
      const int64_t end = begin + base + (s < extra ? 1 : 0);
      if (begin < end) fn(s, begin, end);
    }
  });
}

}  // namespace ssm::cpu
