// The context a computation runs in: which backend computes, with what
// threads, handles and workspace. Passed explicitly to every op and layer; no
// mutable globals hold threads, streams or library handles.
#pragma once

#include <memory>
#include <string_view>

#include "ssm/core/thread_pool.h"
#include "ssm/tensor/arena.h"

namespace ssm {

class Backend;

// Per-context resources a backend keeps (a CUDA stream and cuBLAS handle);
// host backends keep none.
class BackendResources {
 public:
  virtual ~BackendResources() = default;
};

class Context {
 public:
  // The cpu backend; n_threads <= 0 picks the number of hardware threads.
  explicit Context(int n_threads = 1);
  // A backend by name ("ref", "cpu", ...): ssm::Error naming the available
  // ones when it is not built in.
  Context(std::string_view backend, int n_threads);
  Context(const Backend& backend, int n_threads);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Backend& backend() const { return *backend_; }
  Device device() const;
  ThreadPool& pool() { return *pool_; }
  int threads() const { return pool_->size(); }
  // Workspace on the backend's device, shared by every op and layer of a call.
  Arena& arena() { return *arena_; }
  BackendResources* resources() { return resources_.get(); }

 private:
  const Backend* backend_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<BackendResources> resources_;
};

}  // namespace ssm
