// Linear projection, the matrix product every layer is built on:
//   y[M, N] = x[M, K] W[N, K]^T + bias[N]        (W stored (out, in), as in PyTorch)
// and its backward:
//   dx = dy W,   dW += dy^T x,   dbias += sum over rows of dy.
//
// Conventions of every op header: activations are F32 tensors with rows
// (tensor.h: the last dimension contiguous, the others folding into one row
// stride), so column blocks of a projection's output pass without copies; an
// undefined Tensor is an absent input or an unwanted output; gradients of
// parameters are added to (+=), gradients of activations are overwritten
// unless an op says otherwise. All tensors of a call live on the device of
// the context's backend.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct LinearArgs {
  Tensor x;      // (..., K) F32 rows; M = x.rows()
  Tensor W;      // (N, K) F32, F16, BF16 or Q8 (dense)
  Tensor bias;   // (N) F32, or undefined
  Tensor y;      // (..., N) F32 rows, M rows; may not alias x
  bool accumulate = false;  // y += x W^T (+ bias) instead of y =
};
void linear(Context& ctx, const LinearArgs& a);

// A projection of normalised rows, one op so that a backend can normalise
// while it loads the activations (a decode step, where each launch costs
// more than its work; rms_norm.h defines the norms):
//   gate undefined:  y (+)= rms_norm(x; norm_weight, eps) W^T (+ bias)
//   gate defined:    y (+)= gated_rms_norm(x, gate; norm_weight, group, eps,
//                                          norm_before_gate) W^T (+ bias)
// Backends without their own kernel (OpTable::norm_linear null) run the norm
// into a workspace, then linear.
struct NormLinearArgs {
  Tensor x;            // (..., K) F32 rows; M = x.rows()
  Tensor gate;         // like x, or undefined: the plain RMSNorm
  Tensor norm_weight;  // (K), or undefined (rms_norm.h: weightless norm, or the plain gate)
  int64_t group = 0;   // the gated norm's channels normalised together; 0: all K
  float eps = 1e-5f;
  bool norm_before_gate = false;
  Tensor W;     // as LinearArgs'
  Tensor bias;  // (N), or undefined
  Tensor y;     // (..., N) F32 rows, M rows; may not alias x or gate
  bool accumulate = false;
};
void norm_linear(Context& ctx, const NormLinearArgs& a);

struct LinearBackwardArgs {
  Tensor x;   // the forward's input (M, K), F32
  Tensor W;   // (N, K) F32
  Tensor dy;  // (M, N) F32 rows
  Tensor dx;  // (M, K): overwritten, or added to when accumulate_dx; undefined: not wanted
  bool accumulate_dx = false;
  Tensor dW;     // (N, K) F32 dense, accumulated; undefined: not wanted
  Tensor dbias;  // (N) F32, accumulated; undefined: not wanted
};
// Results do not depend on the thread count (fixed blocks, fixed order).
void linear_backward(Context& ctx, const LinearBackwardArgs& a);

}  // namespace ssm::ops
