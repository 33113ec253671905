// One AdamW update (decoupled weight decay, as PyTorch's AdamW) of a run of
// parameter elements:
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p = p (1 - lr wd) - lr (m / bc1) / (sqrt(v / bc2) + eps)
// with bias corrections bc1 = 1 - b1^step, bc2 = 1 - b2^step.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct AdamWArgs {
  Tensor param, grad, m, v;  // equal element counts, F32 dense
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for the bias corrections
};
void adamw(Context& ctx, const AdamWArgs& a);

// One run of a fused update: where its elements are (on the context's
// device), and whether it decays (weight_decay, or none).
struct AdamWSlice {
  float* param = nullptr;
  const float* grad = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  // Of its first element among every slice's, in order, each slice padded
  // to a multiple of 4 elements (the kernels move 4 at a time).
  int64_t begin = 0;
  int64_t n = 0;
  int64_t decays = 0;  // 1: weight_decay applies, 0: none
  // n BF16 on the device, or null: each updated value rounded to nearest
  // even is also written here (the bf16 weight copy of a backend computing
  // in bf16: BackendResources::bf16_copy_for_update).
  void* bf16 = nullptr;
  bool operator==(const AdamWSlice&) const = default;
};
// A table of slices is stored as I64 words, this many a slice.
inline constexpr int64_t kAdamWSliceWords = 8;
static_assert(sizeof(AdamWSlice) == kAdamWSliceWords * 8, "a slice is whole words");

// The update of adamw() over every slice of a table in one launch, each
// element's arithmetic exactly adamw()'s, and the gradient-norm clip of
// the training step folded in: with clip_sum_squares (the squared norm,
// written on the device by sum_squares_to) and max_norm > 0, each gradient
// is first multiplied by the F32 scale max_norm / (norm + 1e-6) when
// norm > max_norm, as a separate scale() would. Nothing waits for the device.
struct AdamWSlicesArgs {
  Tensor table;  // (slices * kAdamWSliceWords) I64 on the device: the AdamWSlices, built once
  int64_t slices = 0;
  int64_t elements = 0;  // the last slice's begin + n
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
  Tensor clip_sum_squares;  // (1) F64 on the device, or undefined: no clip
  double max_norm = 0;
};
// ssm::Error where the backend has no fused update (host backends):
// has_adamw_slices() says which.
void adamw_slices(Context& ctx, const AdamWSlicesArgs& a);
bool has_adamw_slices(Context& ctx);

}  // namespace ssm::ops
