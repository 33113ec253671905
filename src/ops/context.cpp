#include "ssm/ops/context.h"

#include <algorithm>
#include <thread>

#include "ssm/ops/backend.h"

namespace ssm {

Context::Context(int n_threads) : Context(find_backend("cpu"), n_threads) {}

Context::Context(std::string_view backend, int n_threads)
    : Context(find_backend(backend), n_threads) {}

Context::Context(const Backend& backend, int n_threads) : backend_(&backend) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_ = std::make_unique<ThreadPool>(n_threads);
  resources_ = backend.make_resources();
  arena_ = std::make_unique<Arena>(backend.device());
  kept_arena_ = std::make_unique<Arena>(backend.device());
}

Context::~Context() = default;

Device Context::device() const { return backend_->device(); }

}  // namespace ssm
