#include "ops/cuda/weight_copies.h"

#include <algorithm>

#include "ops/cuda/launch.h"
#include "ops/cuda/runtime.h"

namespace ssm::cuda {

void WeightCopies::keep(const void* begin, size_t bytes) {
  if (bytes == 0) return;
  const auto b = reinterpret_cast<uintptr_t>(begin);
  uintptr_t& end = ranges_[b];
  end = std::max(end, b + bytes);
}

void WeightCopies::forget() {
  ranges_.clear();
  copies_.clear();
  ++generation_;
}

const void* WeightCopies::copy_of(const float* src, int64_t rows, int64_t cols, int64_t ld,
                                  int device, cudaStream_t s) {
  if (ranges_.empty() || rows <= 0 || cols <= 0) return nullptr;
  const auto first = reinterpret_cast<uintptr_t>(src);
  const uintptr_t last = first + sizeof(float) * static_cast<size_t>((cols - 1) * ld + rows);
  auto it = ranges_.upper_bound(first);
  if (it == ranges_.begin()) return nullptr;
  --it;
  if (last > it->second) return nullptr;
  Copy& c = copies_[Key{src, rows, cols, ld}];
  if (c.generation == generation_) {
    ++reused_;
    return c.bf16.raw();
  }
  if (!c.bf16.defined()) c.bf16 = Tensor::empty(DType::kBF16, {cols, rows}, Device::cuda(device));
  launch_to_16bit(ConstRows{src, cols, rows, ld}, c.bf16.raw(), /*bf16=*/true, /*pieces=*/1, s);
  check_launch("gemm (weights to bf16)");
  c.generation = generation_;
  ++made_;
  return c.bf16.raw();
}

}  // namespace ssm::cuda
