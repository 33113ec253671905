// The launchers of the ops the HF hybrids need beyond Mamba-2 and Mamba-3
// (hybrid_kernels.cu), in plain types like launch.h: relu^2, embedding
// lookups from 16-bit tables, Zamba2's GELU product, the Mamba-1 selective scan and the
// mixture-of-experts pieces around the experts' projections.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// t = max(t, 0)^2 in place.
void launch_relu_squared(Rows t, cudaStream_t s);
// t = GELU(gate) * t in place (exact GELU, erf), gate and t of one shape.
void launch_gelu_product(ConstRows gate, Rows t, cudaStream_t s);

// out[r] = scale * table[ids[r]] from a dense (V, cols) bf16 (bf16) or f16 table.
void launch_embedding16(const void* ids, bool ids_i64, const void* table, bool bf16, Rows out,
                        float scale, cudaStream_t s);

struct SelectiveScanLaunch {
  int64_t B = 0, L = 0, D = 0, N = 0;
  ConstRows x, dt_raw, Bm, C, z;  // B*L rows; z.p null: no gate
  const float *dt_bias = nullptr, *A_log = nullptr,
              *Dskip = nullptr;  // (D), (D, N), (D); bias, D may be null
  Rows y;
  float* state = nullptr;  // (B, D, N) or null
};
void launch_selective_scan(const SelectiveScanLaunch& a, cudaStream_t s);

// out[i] = x[rows[i] / div] for i < out.rows (rows on the device).
void launch_gather_rows(ConstRows x, const int64_t* rows, int64_t div, Rows out, cudaStream_t s);
// h's first F columns <- silu(h[:, :F]) * h[:, F:2F] (gated) or relu(h[:, :F])^2.
void launch_expert_activation(Rows h, int64_t F, bool gated, cudaStream_t s);
// out[t] (+)= sum_j weights[t, j] ys[pos[t k + j]], j = 0..k-1 in order
// (weights.p null: unit weights).
void launch_moe_combine(ConstRows ys, const int64_t* pos, ConstRows weights, int64_t k, Rows out,
                        bool accumulate, cudaStream_t s);

}  // namespace ssm::cuda

namespace ssm::cuda {

// Causal grouped-query attention with a KV cache (ops/attention.h): every
// tensor F32 on the device, past (B) I64 on the device too.
struct AttentionLaunch {
  int64_t B = 0, L = 0, H = 0, Hkv = 0, hd = 0, capacity = 0,
          half = 0;                              // half: rotary pairs (0: none)
  Rows qkv;                                      // B*L rows of (H + 2 Hkv) hd
  const float* inv_freq = nullptr;               // (half)
  float *k_cache = nullptr, *v_cache = nullptr;  // (B, Hkv, capacity, hd)
  const int64_t* past = nullptr;
  float scale = 1.f;
  Rows out;  // B*L rows of H hd
  // Products F32-exact (the 3xTF32 split); false when the context rounds
  // its products (CudaResources::rounds_products): one TF32 product each.
  bool split = true;
};
// Whether launch_attention takes the tiled kernel (prefill of head dims up to
// 128); else the split decode kernels, which need attention_decode_scratch
// floats of scratch and take head dims up to attention_decode_max_head_dim.
// Neither limits the keys.
bool attention_tiled(const AttentionLaunch& a);
int64_t attention_decode_scratch(const AttentionLaunch& a);
int64_t attention_decode_max_head_dim();
// Rotates q and k of the new tokens in place and writes k, v into the caches.
void launch_attention_append_kv(const AttentionLaunch& a, cudaStream_t s);
// out = softmax(scale q K^T) V over the keys s <= past[b] + t; scratch:
// attention_decode_scratch(a) floats (null when that is 0).
void launch_attention(const AttentionLaunch& a, float* scratch, cudaStream_t s);

}  // namespace ssm::cuda
