#include "ssm/train/ops/attention_backward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ssm/ops/gemm.h"

namespace ssm::ops {
namespace {

// Queries per block, as in the forward: one (block x keys) score matrix.
constexpr int64_t kBlock = 64;

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

void attention_backward(const AttentionBackwardArgs& a, ThreadPool& pool) {
  const int64_t L = a.length, hd = a.head_dim, blk = std::min(kBlock, L);
  if (L == 0) return;
  pool.parallel_for(a.batch * a.kv_heads, [&](int64_t i0, int64_t i1) {
    const int64_t hpg = a.heads / a.kv_heads;
    std::vector<float> probs(blk * L), dP(blk * L);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / a.kv_heads, kvh = i % a.kv_heads;
      const float* K = a.k + i * L * hd;
      const float* V = a.v + i * L * hd;
      float* dK = a.dk + b * L * a.ld_dkv + kvh * hd;
      float* dV = a.dv + b * L * a.ld_dkv + kvh * hd;
      for (int64_t t = 0; t < L; ++t) {
        std::memset(dK + t * a.ld_dkv, 0, hd * sizeof(float));
        std::memset(dV + t * a.ld_dkv, 0, hd * sizeof(float));
      }
      for (int64_t h = kvh * hpg; h < (kvh + 1) * hpg; ++h)
        for (int64_t t0 = 0; t0 < L; t0 += blk) {
          const int64_t nb = std::min(blk, L - t0), keys = t0 + nb;
          const float* Qb = a.q + (b * L + t0) * a.ld_q + h * hd;
          const float* Ob = a.out + (b * L + t0) * a.ld_out + h * hd;
          const float* dOb = a.dout + (b * L + t0) * a.ld_out + h * hd;
          gemm(false, true, nb, keys, hd, a.scale, Qb, a.ld_q, K, hd, 0.f, probs.data(), keys);
          for (int64_t r = 0; r < nb; ++r)
            softmax_prefix(probs.data() + r * keys, t0 + r + 1, keys);
          gemm(false, true, nb, keys, hd, 1.f, dOb, a.ld_out, V, hd, 0.f, dP.data(), keys);
          for (int64_t r = 0; r < nb; ++r) {
            double delta = 0;  // rowsum(P o dP) = dO . O
            for (int64_t d = 0; d < hd; ++d)
              delta += static_cast<double>(dOb[r * a.ld_out + d]) * Ob[r * a.ld_out + d];
            const float* pr = probs.data() + r * keys;
            float* ds = dP.data() + r * keys;
            for (int64_t j = 0; j < keys; ++j) ds[j] = pr[j] * static_cast<float>(ds[j] - delta);
          }
          gemm(false, false, nb, hd, keys, a.scale, dP.data(), keys, K, hd, 0.f,
               a.dq + (b * L + t0) * a.ld_dq + h * hd, a.ld_dq);
          gemm(true, false, keys, hd, nb, a.scale, dP.data(), keys, Qb, a.ld_q, 1.f, dK, a.ld_dkv);
          gemm(true, false, keys, hd, nb, 1.f, probs.data(), keys, dOb, a.ld_out, 1.f, dV,
               a.ld_dkv);
        }
    }
  });
}

}  // namespace ssm::ops
