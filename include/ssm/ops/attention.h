// Causal grouped-query attention over a KV cache (SPEC §5), in two ops:
//   attention_append_kv  rotary on q and k (first rotary_dim channels, pairs
//                        (i, i + rotary_dim/2), angle position * inv_freq[i]),
//                        then k and v written into the caches;
//   attention            out = softmax(scale q K^T, causal) V per query head,
//                        query head h reading kv head h / (H / H_kv).
// Sequences of a batch may hold different numbers of cached tokens: query t
// of sequence b sits at position past[b] + t and sees keys [0, past[b] + t].
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct AttentionArgs {
  int64_t batch = 0, length = 0;                  // B; L new tokens per sequence
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // H, H_kv, hd

  // Rows b*L + t of the in_proj output: [q (H hd) | k (H_kv hd) | v (H_kv hd)].
  // attention_append_kv rotates q and k here in place.
  float* qkv = nullptr;
  int64_t ld_qkv = 0;

  int64_t rotary_dim = 0;           // 0: no rotary
  const float* inv_freq = nullptr;  // (rotary_dim / 2)

  // Caches (B, H_kv, capacity, hd); capacity >= past[b] + L for every b.
  float* k_cache = nullptr;
  float* v_cache = nullptr;
  int64_t capacity = 0;
  const int64_t* past = nullptr;  // (B): tokens cached before these L

  float scale = 1.f;     // softmax scale
  float* out = nullptr;  // out[(b*L + t)*ld_out + h*hd + d]
  int64_t ld_out = 0;
  float* scratch = nullptr;  // attention_scratch_floats(args) floats
};

// Rotates q and k of the new tokens and appends k, v to the caches at
// positions past[b] + t. Parallel over rows.
void attention_append_kv(const AttentionArgs& a, ThreadPool& pool);

// Attention of the new queries over the cached keys (which must already
// include the new tokens). Parallel over (batch, head); blocks of queries
// form their scores with one matrix product each.
void attention(const AttentionArgs& a, ThreadPool& pool);

// Floats of scratch that attention() needs for these sizes and capacity.
int64_t attention_scratch_floats(int64_t batch, int64_t length, int64_t heads, int64_t capacity);

}  // namespace ssm::ops
