// Causal depthwise convolution over time, with the SiLU that follows it in
// Mamba-2 (SPEC §3), carrying the last K-1 inputs as decode state:
//   out[b, t, c] = act( sum_{k<K} w[c, 0, k] in[b, t-K+1+k, c] + bias[c] )
// where inputs before t = 0 come from the state (zeros for a fresh sequence).
// With L = 1 this is the decode step: backends take their allocation-free
// step path.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct Conv1dArgs {
  Tensor in;      // (B, L, C) rows
  Tensor weight;  // (C, 1, K) dense
  Tensor bias;    // (C), or undefined
  // (B, K-1, C) dense: the inputs before t = 0 on entry, the last K-1 inputs
  // on return. Undefined: zeros, and nothing is kept.
  Tensor state;
  Tensor out;  // (B, L, C) rows; may not alias in
  bool silu = true;
};
void conv1d(Context& ctx, const Conv1dArgs& a);

// Backward for sequences that started fresh (zero state).
struct Conv1dBackwardArgs {
  Tensor in, weight, bias;  // the forward's
  bool silu = true;
  Tensor dout;     // (B, L, C) rows
  Tensor din;      // (B, L, C) rows, overwritten
  Tensor dweight;  // (C, 1, K) accumulated; undefined: not wanted
  Tensor dbias;    // (C) accumulated; undefined: not wanted
};
void conv1d_backward(Context& ctx, const Conv1dBackwardArgs& a);

}  // namespace ssm::ops
