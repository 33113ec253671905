// Pointwise activations of MLPs that are not gated by SiLU, in place:
//   relu_squared:  t = max(t, 0)^2        (Nemotron-H's relu2)
//   gelu_product:  t = GELU(gate) * t     (Zamba2's gated MLP), with the
//                  exact GELU(v) = v * (1 + erf(v / sqrt 2)) / 2, not the
//                  tanh approximation
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

// t: F32 with rows, overwritten.
void relu_squared(Context& ctx, const Tensor& t);
// gate and t: F32 with rows, the same shape; t overwritten, gate read only
// (they may be column blocks of the same rows, not overlapping).
void gelu_product(Context& ctx, const Tensor& gate, const Tensor& t);

// The backwards, in place over the gradient of the output:
//   relu_squared_backward: d = d * 2 max(x, 0), x the forward's input
//   gelu_product_backward: dgate = d * t * GELU'(gate), then d = d * GELU(gate),
//   t the forward's input (not its output); dgate is overwritten.
// Every tensor F32 with rows, of one shape.
void relu_squared_backward(Context& ctx, const Tensor& x, const Tensor& d);
void gelu_product_backward(Context& ctx, const Tensor& gate, const Tensor& t, const Tensor& dgate,
                           const Tensor& d);

}  // namespace ssm::ops
