// Whole-tensor moves and sums that layers and the model would otherwise
// write as loops: residual adds, strided copies (gathering last rows,
// copying a sequence's state, growing a KV cache, cutting time segments),
// fills and scaling.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

// dst += alpha * src; same shape, both F32 with rows.
void add(Context& ctx, const Tensor& dst, const Tensor& src, float alpha = 1.f);
// dst = src element by element: same shape and dtype, any strides (the last
// dimension contiguous), not overlapping.
void copy(Context& ctx, const Tensor& dst, const Tensor& src);
// Every element of dst (F32 with rows, or any dense tensor for value 0) = value.
void fill(Context& ctx, const Tensor& dst, float value);
// t *= alpha; F32 with rows.
void scale(Context& ctx, const Tensor& t, float alpha);
// Sum of squares of every element of an F32 tensor with rows, in double.
double sum_squares(Context& ctx, const Tensor& t);
// The same sum written into out, an F64 (1) tensor on the context's device,
// in order with the context's work: a device backend does not wait for it
// (training's gradient norm stays on the device until it is reported).
void sum_squares_to(Context& ctx, const Tensor& t, const Tensor& out);

}  // namespace ssm::ops
