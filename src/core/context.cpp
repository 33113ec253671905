#include "ssm/core/context.h"

#include <thread>

namespace ssm {

Context::Context(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_ = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace ssm
