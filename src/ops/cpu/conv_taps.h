// One output row of the causal depthwise convolution (conv1d's prefill and
// its decode step), vectorised over the channels (Highway, chosen at run time for the CPU).
// Each channel's sum is formed as the scalar loops of conv1d.cpp form it:
// the bias (or 0), then each tap's product added, oldest input first, with
// a rounded product and a rounded sum (no fused multiply-add), so a row
// equals the decode step's to the last bit.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// out[c] = bias[c] + sum_k taps[k * ld_taps + c] * in[k][c] for c < C,
// k < K (in ascending k); a null bias counts as 0. `in` holds K row
// pointers, oldest first. With `silu`, out[c] is SiLU of that, formed as
// silu_in_place forms it (x / (1 + exp(-x)), the tail through a full
// vector), while the sums are still in registers: a second pass over the row
// was a third of the convolution's time in a Mamba-2 prefill.
void conv_taps_row(const float* const* in, const float* taps, int64_t ld_taps, const float* bias,
                   int64_t K, int64_t C, bool silu, float* out);

}  // namespace ssm::cpu
