// When a loop of the cpu kernels goes to the thread pool: below
// kMinParallelElements elements, waking the workers costs more than the
// work, so the calling thread does it all.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::cpu {

inline constexpr int64_t kMinParallelElements = int64_t{1} << 15;

// fn(begin, end) over [0, n), items of `elements` elements each.
template <typename Fn>
void parallel_items(ThreadPool& pool, int64_t n, int64_t elements, Fn&& fn) {
  if (n <= 0) return;
  if (n * elements < kMinParallelElements)
    fn(int64_t{0}, n);
  else
    pool.parallel_for(n, fn);
}

}  // namespace ssm::cpu
