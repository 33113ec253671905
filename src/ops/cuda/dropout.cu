// Dropout's kernel: a thread per element, its mask bit hashed from its
// index (ops/dropout_mask.h), so the bits are the host backends' own.
#include <algorithm>

#include "ops/cuda/launch_dropout.h"
#include "ops/dropout_mask.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void dropout_kernel(Rows t, uint64_t key, uint32_t threshold, float scale) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* p = t.p + (i / t.cols) * t.stride + i % t.cols;
    const bool keep = ops::dropout_mask::keep(key, static_cast<uint64_t>(i), threshold);
    *p = keep ? *p * scale : 0.f;  // one rounded product, as on the host
  }
}

}  // namespace

void launch_dropout(Rows t, uint64_t key, uint32_t threshold, float scale, cudaStream_t s) {
  const int64_t n = t.rows * t.cols;
  if (n == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 16));
  dropout_kernel<<<blocks, kThreads, 0, s>>>(t, key, threshold, scale);
}

}  // namespace ssm::cuda
