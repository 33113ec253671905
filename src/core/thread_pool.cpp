#include "ssm/core/thread_pool.h"

#include <algorithm>

#include "ssm/core/error.h"

namespace ssm {
namespace {
thread_local bool t_inside_pool = false;

void range_of(int64_t n, int parts, int index, int64_t& begin, int64_t& end) {
  const int64_t base = n / parts, extra = n % parts;
  begin = index * base + std::min<int64_t>(index, extra);
  end = begin + base + (index < extra ? 1 : 0);
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    RangeFn task;
    int64_t n;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      task = task_;
      n = task_n_;
    }
    int64_t begin, end;
    range_of(n, n_threads_, index, begin, end);
    std::exception_ptr err;
    if (begin < end) {
      try {
        task(begin, end);
      } catch (...) {
        err = std::current_exception();
      }
    }
    std::lock_guard lock(mutex_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::run(int64_t n, RangeFn fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = fn;
    task_n_ = n;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  int64_t begin, end;
  range_of(n, n_threads_, 0, begin, end);
  std::exception_ptr err;
  t_inside_pool = true;
  try {
    if (begin < end) fn(begin, end);
  } catch (...) {
    err = std::current_exception();
  }
  t_inside_pool = false;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (!err) err = error_;
  if (err) std::rethrow_exception(err);
}

}  // namespace ssm
