// The cpu attention forward: rotary and cache writes parallel over rows; the
// attention parallel over (sequence, query head), each block of queries
// forming its scores with one small matrix product against the cached keys
// and its output with one against the cached values.
#include <cmath>
#include <cstring>

#include "ops/cpu/attention_backward.h"
#include "ops/cpu/attention_blocks.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {

namespace {

void append_kv(Context& ctx, const ops::AttentionArgs& a) {
  const int64_t L = a.qkv.dim(1), H = a.heads, Hkv = a.kv_heads;
  const int64_t cap = a.k_cache.dim(2), hd = a.k_cache.dim(3);
  const int64_t half = a.inv_freq.defined() ? a.inv_freq.numel() : 0;
  const float* inv_freq = half ? a.inv_freq.data<float>() : nullptr;
  const int64_t* past = a.past.data<int64_t>();
  const ops::Rows<float> qkv(a.qkv);
  float* k_cache = ops::elements<float>(a.k_cache);
  float* v_cache = ops::elements<float>(a.v_cache);
  ctx.pool().parallel_for(a.qkv.rows(), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t b = row / L, pos = past[b] + row % L;
      float* q = qkv[row];
      float* k = q + H * hd;
      const float* v = k + Hkv * hd;
      for (int64_t i = 0; i < half; ++i) {
        // The product in double keeps far positions' angles exact to float.
        const double angle = static_cast<double>(pos) * inv_freq[i];
        const float c = static_cast<float>(std::cos(angle)),
                    s = static_cast<float>(std::sin(angle));
        for (int64_t h = 0; h < H; ++h) ops::rotate_pair(q + h * hd, i, i + half, c, s);
        for (int64_t h = 0; h < Hkv; ++h) ops::rotate_pair(k + h * hd, i, i + half, c, s);
      }
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t at = ((b * Hkv + h) * cap + pos) * hd;
        std::memcpy(k_cache + at, k + h * hd, hd * sizeof(float));
        std::memcpy(v_cache + at, v + h * hd, hd * sizeof(float));
      }
    }
  });
}

void attention(Context& ctx, const ops::AttentionArgs& a) {
  const int64_t B = a.k_cache.dim(0), L = a.qkv.dim(1), H = a.heads, Hkv = a.kv_heads;
  const int64_t cap = a.k_cache.dim(2), hd = a.k_cache.dim(3), blk = std::min(kQueryBlock, L);
  if (B * L == 0) return;
  const int64_t* past = a.past.data<int64_t>();
  int64_t max_keys = 0;
  for (int64_t b = 0; b < B; ++b) max_keys = std::max(max_keys, past[b] + L);
  const int64_t tasks = B * H;
  float* scratch = ctx.arena()
                       .alloc(DType::kF32, {chunk_count(ctx.pool(), tasks), blk * max_keys})
                       .data<float>();
  const ops::Rows<const float> qkv(a.qkv);
  const ops::Rows<float> out(a.out);
  const float* k_cache = a.k_cache.data<float>();
  const float* v_cache = a.v_cache.data<float>();
  for_each_chunk(ctx.pool(), tasks, [&](int64_t chunk, int64_t i0, int64_t i1) {
    float* scores = scratch + chunk * blk * max_keys;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, kvh = h / (H / Hkv), cached = past[b];
      const float* K = k_cache + (b * Hkv + kvh) * cap * hd;
      const float* V = v_cache + (b * Hkv + kvh) * cap * hd;
      for (int64_t t0 = 0; t0 < L; t0 += blk) {
        const int64_t nb = std::min(blk, L - t0), keys = cached + t0 + nb;
        const float* Qb = qkv[b * L + t0] + h * hd;
        gemm(false, true, nb, keys, hd, a.scale, Qb, qkv.ld, K, hd, 0.f, scores, keys);
        for (int64_t r = 0; r < nb; ++r)
          softmax_prefix(scores + r * keys, cached + t0 + r + 1, keys);
        gemm(false, false, nb, hd, keys, 1.f, scores, keys, V, hd, 0.f, out[b * L + t0] + h * hd,
             out.ld);
      }
    }
  });
}

}  // namespace

void add_attention_kernels(OpTable& t) {
  t.attention_append_kv = &append_kv;
  t.attention = &attention;
  t.attention_backward = &attention_backward;
  t.rope_backward = &rope_backward;
}

}  // namespace ssm::cpu
