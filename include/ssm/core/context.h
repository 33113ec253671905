// The execution context passed explicitly to everything that computes: no
// mutable globals hold threads or handles.
#pragma once

#include <memory>

#include "ssm/core/thread_pool.h"

namespace ssm {

class Context {
 public:
  // n_threads <= 0 picks the number of hardware threads.
  explicit Context(int n_threads = 1);
  ThreadPool& pool() { return *pool_; }
  int threads() const { return pool_->size(); }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace ssm
