// Backward of the rotary rotations of ops/rotary.h: a pair rotated by angle
// phi, (a, b) -> (a cos - b sin, a sin + b cos), passes its gradient back
// rotated by -phi, and phi receives dy_b y_a - dy_a y_b (y the rotated pair).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/rotary.h"

namespace ssm::ops {

// Pair j of the rotated vector y and its gradient dy: turns dy into the
// gradient of the unrotated vector in place and returns d(angle).
inline float rotate_pair_backward(const float* y, float* dy, RotaryPairs pairs, int64_t half,
                                  int64_t j, float c, float s) {
  const int64_t i0 = pairs == RotaryPairs::kAdjacent ? 2 * j : j;
  const int64_t i1 = pairs == RotaryPairs::kAdjacent ? 2 * j + 1 : j + half;
  const float da = dy[i0], db = dy[i1];
  dy[i0] = da * c + db * s;
  dy[i1] = -da * s + db * c;
  return db * y[i0] - da * y[i1];
}

// Backward of the fixed RoPE of attention_append_kv on rows b*L + t
// (position t, sequences starting fresh): un-rotates the gradients of q
// (`heads` heads) and k (`kv_heads` heads) in place. dqkv rows hold
// [dq | dk | ...] with row stride ld, each head head_dim wide; the first
// rotary_dim channels are pairs (i, i + rotary_dim/2) at angle t inv_freq[i].
void rope_backward(float* dqkv, int64_t ld, int64_t batch, int64_t length, int64_t heads,
                   int64_t kv_heads, int64_t head_dim, int64_t rotary_dim, const float* inv_freq,
                   ThreadPool& pool);

}  // namespace ssm::ops
