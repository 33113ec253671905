// A fixed pool of workers for data-parallel loops. Work is split statically
// into contiguous ranges, so which thread runs an index never changes a
// result: every index is computed by the same code in the same order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ssm {

class ThreadPool {
 public:
  // n_threads counts the calling thread: 1 means no workers at all.
  explicit ThreadPool(int n_threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n). Blocks until all
  // are done; rethrows the first exception. Nested calls run inline.
  // fn is referenced, never copied, so no call allocates (a std::function
  // would for captures past its small buffer, once per call in decode loops).
  template <typename F>
  void parallel_for(int64_t n, F&& fn) {
    run(n, reference(fn), Split::kStatic);
  }

  // As parallel_for, but the ranges are handed out while the loop runs, to
  // whichever thread is free, shrinking towards the end (half of what is
  // left, shared out): a thread that starts late (a worker still waking up)
  // or runs slowly (memory, another program on its core) takes less, and the
  // threads finish nearly together. fn may be called several times on one
  // thread. Only for loops whose every index gives the same result whichever
  // range it is in and whichever thread runs it (decoding's row blocks and
  // heads). SSM_POOL_DYNAMIC=0 splits these statically too (for measuring).
  template <typename F>
  void parallel_for_dynamic(int64_t n, F&& fn) {
    run(n, reference(fn), Split::kDynamic);
  }

 private:
  // A non-owning reference to the caller's callable, alive until run returns.
  struct RangeFn {
    void* object;
    void (*call)(void*, int64_t, int64_t);
    void operator()(int64_t b, int64_t e) const { call(object, b, e); }
  };
  template <typename F>
  static RangeFn reference(F& fn) {
    return RangeFn{const_cast<void*>(static_cast<const void*>(&fn)),
                   [](void* f, int64_t b, int64_t e) { (*static_cast<F*>(f))(b, e); }};
  }
  enum class Split { kStatic, kDynamic };
  void run(int64_t n, RangeFn fn, Split split);
  // Runs the loop's share of thread `index`: its static range, or ranges
  // claimed from next_ until none is left.
  void run_share(RangeFn fn, int64_t n, Split split, int index);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  RangeFn task_{};
  int64_t task_n_ = 0;
  Split task_split_ = Split::kStatic;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  // The first index not yet claimed by a dynamic loop; on its own cache line,
  // away from the counts the idle workers poll.
  alignas(64) int64_t next_ = 0;
};

}  // namespace ssm
