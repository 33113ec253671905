// Causal grouped-query attention over a KV cache (SPEC §5), in two ops:
//   attention_append_kv  rotary on q and k (the first rotary_dim channels of
//                        each head, pairs (i, i + rotary_dim/2), angle
//                        position * inv_freq[i]), then k and v written into
//                        the caches at positions past[b] + t;
//   attention            out = softmax(scale q K^T, causal) V per query head,
//                        query head h reading kv head h / (H / H_kv).
// Sequences of a batch may hold different numbers of cached tokens: query t
// of sequence b sits at position past[b] + t and sees keys [0, past[b] + t].
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct AttentionArgs {
  int64_t heads = 0, kv_heads = 0;  // H, H_kv (head_dim hd = cache.dim(3))
  // (B, L, (H + 2 H_kv) hd) rows: [q | k | v] from in_proj. append_kv
  // rotates q and k here in place.
  Tensor qkv;
  Tensor inv_freq;  // (rotary_dim / 2), or undefined: no rotary
  // (B, H_kv, capacity, hd) dense; capacity >= past[b] + L for every b.
  Tensor k_cache, v_cache;
  // (B) I64 on the host: tokens cached before these L. Positions are
  // scheduling information, read by the host side of every backend.
  Tensor past;
  // Optional: past's values on the context's device, put there before the
  // call by its caller (a decode step recorded as a graph, whose replays
  // must read each step's positions from memory, not from the recording).
  // A backend that reads positions on the device uses it and copies
  // nothing; the checks still read past.
  Tensor past_on_device;
  float scale = 1.f;  // softmax scale
  Tensor out;         // (B, L, H hd) rows, written by attention()
};
void attention_append_kv(Context& ctx, const AttentionArgs& a);
// The caches must already hold the new tokens (append_kv first).
void attention(Context& ctx, const AttentionArgs& a);

// Backward for sequences that start fresh (past = 0), without the rotation
// (rope_backward takes gradients back through it):
//   P = softmax(scale q K^T) over keys s <= t,
//   dV = P^T dO,  dS = P o (dO V^T - rowsum(dO o O)),  dq = scale dS K,  dK = scale dS^T q.
struct AttentionBackwardArgs {
  int64_t heads = 0, kv_heads = 0;
  Tensor q;     // (B, L, H hd) rows: the rotated queries
  Tensor k, v;  // (B, H_kv, L, hd) dense, as append_kv cached them
  Tensor out;   // (B, L, H hd) rows: the forward's output
  Tensor dout;  // like out
  float scale = 1.f;
  Tensor dq;      // like q, overwritten
  Tensor dk, dv;  // (B, L, H_kv hd) rows, overwritten
};
void attention_backward(Context& ctx, const AttentionBackwardArgs& a);

// Un-rotates, in place, the gradients of the rotated q and k of tokens at
// positions 0..L-1: dq (B, L, H hd) and dk (B, L, H_kv hd) rows.
struct RopeBackwardArgs {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  Tensor inv_freq;  // (rotary_dim / 2)
  Tensor dq, dk;
};
void rope_backward(Context& ctx, const RopeBackwardArgs& a);

// The inverse frequencies of standard RoPE over rotary_dim channels,
// base^(-2i / rotary_dim) for i < rotary_dim / 2, as a host F32 tensor
// (undefined for rotary_dim 0).
Tensor rotary_inv_freq(int64_t rotary_dim, double base);

}  // namespace ssm::ops
