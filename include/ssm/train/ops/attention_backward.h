// Backward of causal grouped-query attention (ops/attention.h) for
// sequences that start fresh: with P = softmax(scale q K^T) over keys s <= t,
//   dV += P^T dO,  dS = P o (dO V^T - rowsum(dO o O)),
//   dq = scale dS K,  dK += scale dS^T q.
// Rotary is not part of it: q and k are the rotated ones (see
// rotary_backward.h for taking the gradients back through the rotation).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct AttentionBackwardArgs {
  int64_t batch = 0, length = 0;                  // B, L
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // H, H_kv, hd
  const float* q = nullptr;                       // q[(b*L + t)*ld_q + h*hd + d]
  int64_t ld_q = 0;
  const float* k = nullptr;     // (B, H_kv, L, hd), as attention_append_kv caches them
  const float* v = nullptr;     // (B, H_kv, L, hd)
  const float* out = nullptr;   // the forward's output, out[(b*L + t)*ld_out + h*hd + d]
  const float* dout = nullptr;  // its gradient, same layout
  int64_t ld_out = 0;
  float scale = 1.f;
  // Overwritten: dq like q (stride ld_dq); dk, dv rows (b*L + t), head j at
  // j*hd, row stride ld_dkv.
  float* dq = nullptr;
  int64_t ld_dq = 0;
  float* dk = nullptr;
  float* dv = nullptr;
  int64_t ld_dkv = 0;
};

// Parallel over (batch, kv head): each task owns its kv head's dk, dv and
// the dq of the query heads that read it, so sums run in a fixed order.
void attention_backward(const AttentionBackwardArgs& a, ThreadPool& pool);

}  // namespace ssm::ops
