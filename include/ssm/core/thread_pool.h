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
    run(n, RangeFn{const_cast<void*>(static_cast<const void*>(&fn)),
                   [](void* f, int64_t b, int64_t e) { (*static_cast<std::remove_reference_t<F>*>(f))(b, e); }});
  }

 private:
  // A non-owning reference to the caller's callable, alive until run returns.
  struct RangeFn {
    void* object;
    void (*call)(void*, int64_t, int64_t);
    void operator()(int64_t b, int64_t e) const { call(object, b, e); }
  };
  void run(int64_t n, RangeFn fn);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  RangeFn task_{};
  int64_t task_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ssm
