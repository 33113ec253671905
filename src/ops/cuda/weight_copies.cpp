#include "ops/cuda/weight_copies.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "ops/cuda/launch.h"
#include "ops/cuda/runtime.h"

namespace ssm::cuda {

void WeightCopies::keep(const void* begin, size_t bytes) {
  if (bytes == 0) return;
  const auto b = reinterpret_cast<uintptr_t>(begin);
  uintptr_t& end = ranges_[b];
  end = std::max(end, b + bytes);
}

void WeightCopies::changed() {
  ++generation_;
  for (auto& [begin, w] : wholes_) {
    if (w.in_update) {
      w.generation = generation_;
      ++updated_;
    }
    w.in_update = false;
  }
}

void WeightCopies::forget() {
  ranges_.clear();
  copies_.clear();
  wholes_.clear();
  ++generation_;
}

WeightCopies::Whole* WeightCopies::whole_of(uintptr_t first, uintptr_t last) {
  auto it = wholes_.upper_bound(first);
  if (it == wholes_.begin()) return nullptr;
  --it;
  const uintptr_t end = it->first + sizeof(float) * static_cast<size_t>(it->second.n);
  return last <= end ? &it->second : nullptr;
}

void* WeightCopies::for_update(const float* begin, int64_t n, int device) {
  if (ranges_.empty() || n <= 0) return nullptr;
  const auto first = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t last = first + sizeof(float) * static_cast<size_t>(n);
  if (auto w = wholes_.find(first); w != wholes_.end()) {
    if (w->second.n != n) return nullptr;
    w->second.in_update = true;
    return w->second.bf16.raw();
  }
  auto r = ranges_.upper_bound(first);
  if (r == ranges_.begin() || last > std::prev(r)->second) return nullptr;
  // No overlap with another whole run (a run belongs to one update).
  auto next = wholes_.upper_bound(first);
  if (next != wholes_.end() && next->first < last) return nullptr;
  if (next != wholes_.begin() &&
      std::prev(next)->first + sizeof(float) * static_cast<size_t>(std::prev(next)->second.n) > first)
    return nullptr;
  // Only weights the products use: the dense copies inside the run, which
  // the whole run replaces.
  bool used = false;
  for (auto c = copies_.begin(); c != copies_.end();) {
    const auto& [src, rows, cols, ld] = c->first;
    const auto a = reinterpret_cast<uintptr_t>(src);
    if (ld == rows && a >= first && a + sizeof(float) * static_cast<size_t>(rows * cols) <= last) {
      used = true;
      c = copies_.erase(c);
    } else {
      ++c;
    }
  }
  if (!used) return nullptr;
  Whole& w = wholes_[first];
  w.begin = begin;
  w.n = n;
  w.bf16 = Tensor::empty(DType::kBF16, {n}, Device::cuda(device));
  w.in_update = true;
  return w.bf16.raw();
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
  // Inside a whole run: its bytes, converted whole where the last update
  // did not write them (in rows of 1024 and the rest: the conversion's
  // rows go over the grid's y).
  if (Whole* w = ld == rows ? whole_of(first, last) : nullptr) {
    if (w->generation == generation_) {
      ++reused_;
    } else {
      constexpr int64_t kCols = 1024;
      const int64_t full = w->n / kCols, rest = w->n - full * kCols;
      auto* to = static_cast<uint16_t*>(w->bf16.raw());
      if (full > 0) launch_to_16bit(ConstRows{w->begin, full, kCols, kCols}, to, true, 1, s);
      if (rest > 0)
        launch_to_16bit(ConstRows{w->begin + full * kCols, 1, rest, rest}, to + full * kCols, true, 1, s);
      check_launch("gemm (weights to bf16, a whole run)");
      w->generation = generation_;
      ++made_;
    }
    return static_cast<const uint16_t*>(w->bf16.raw()) + (src - w->begin);
  }
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
