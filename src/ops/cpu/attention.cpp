#include "ssm/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ssm/ops/gemm.h"
#include "ssm/ops/rotary.h"

namespace ssm::ops {
namespace {

// Queries per block: one score matrix (block x keys) per product.
constexpr int64_t kBlock = 64;

int64_t block_rows(int64_t length) { return std::min(kBlock, length); }

// Softmax over the first n entries of row, zeroing the rest up to width.
void softmax_prefix(float* row, int64_t n, int64_t width) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - mx);
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  std::fill(row + n, row + width, 0.f);
}

}  // namespace

int64_t attention_scratch_floats(int64_t batch, int64_t length, int64_t heads, int64_t capacity) {
  return batch * heads * block_rows(length) * capacity;
}

void attention_append_kv(const AttentionArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.length, [&a](int64_t row0, int64_t row1) {
    const int64_t L = a.length, H = a.heads, Hkv = a.kv_heads, hd = a.head_dim;
    const int64_t half = a.rotary_dim / 2;
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t b = row / L, pos = a.past[b] + row % L;
      float* q = a.qkv + row * a.ld_qkv;
      float* k = q + H * hd;
      const float* v = k + Hkv * hd;
      for (int64_t i = 0; i < half; ++i) {
        // The product in double keeps far positions' angles exact to float.
        const double angle = static_cast<double>(pos) * a.inv_freq[i];
        const float c = static_cast<float>(std::cos(angle)),
                    s = static_cast<float>(std::sin(angle));
        for (int64_t h = 0; h < H; ++h)
          rotate_pair(q + h * hd, RotaryPairs::kHalves, half, i, c, s);
        for (int64_t h = 0; h < Hkv; ++h)
          rotate_pair(k + h * hd, RotaryPairs::kHalves, half, i, c, s);
      }
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t at = ((b * Hkv + h) * a.capacity + pos) * hd;
        std::memcpy(a.k_cache + at, k + h * hd, hd * sizeof(float));
        std::memcpy(a.v_cache + at, v + h * hd, hd * sizeof(float));
      }
    }
  });
}

void attention(const AttentionArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.heads, [&a](int64_t i0, int64_t i1) {
    const int64_t L = a.length, H = a.heads, hd = a.head_dim, blk = block_rows(L);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, kvh = h / (H / a.kv_heads), past = a.past[b];
      const float* K = a.k_cache + (b * a.kv_heads + kvh) * a.capacity * hd;
      const float* V = a.v_cache + (b * a.kv_heads + kvh) * a.capacity * hd;
      float* scores = a.scratch + i * blk * a.capacity;
      for (int64_t t0 = 0; t0 < L; t0 += blk) {
        const int64_t nb = std::min(blk, L - t0), keys = past + t0 + nb;
        const float* Qb = a.qkv + (b * L + t0) * a.ld_qkv + h * hd;
        gemm(false, true, nb, keys, hd, a.scale, Qb, a.ld_qkv, K, hd, 0.f, scores, keys);
        for (int64_t r = 0; r < nb; ++r) softmax_prefix(scores + r * keys, past + t0 + r + 1, keys);
        gemm(false, false, nb, hd, keys, 1.f, scores, keys, V, hd, 0.f,
             a.out + (b * L + t0) * a.ld_out + h * hd, a.ld_out);
      }
    }
  });
}

}  // namespace ssm::ops
