// The cpu attention backward, parallel over (sequence, kv head): each task
// owns its kv head's dk and dv and the dq of the query heads that read it,
// so every sum runs in a fixed order whatever the thread count. Blocks of
// queries recompute their probabilities with one product, as the forward.
#include "ops/cpu/attention_backward.h"

#include <cmath>
#include <cstring>

#include "ops/cpu/attention_blocks.h"
#include "ops/cpu/blas.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {

void attention_backward(Context& ctx, const ops::AttentionBackwardArgs& a) {
  const int64_t B = a.k.dim(0), L = a.k.dim(2), hd = a.k.dim(3), Hkv = a.kv_heads;
  const int64_t blk = std::min(kQueryBlock, L), hpg = a.heads / Hkv, tasks = B * Hkv;
  if (L == 0 || B == 0) return;
  // Per thread: the block's probabilities and the gradient of its scores.
  float* scratch =
      ctx.arena().alloc(DType::kF32, {chunk_count(ctx.pool(), tasks), 2, blk * L}).data<float>();
  const ops::Rows<const float> q(a.q), out(a.out), dout(a.dout);
  const ops::Rows<float> dq(a.dq), dk(a.dk), dv(a.dv);
  const float* k_all = a.k.data<float>();
  const float* v_all = a.v.data<float>();
  for_each_chunk(ctx.pool(), tasks, [&](int64_t chunk, int64_t i0, int64_t i1) {
    float* probs = scratch + chunk * 2 * blk * L;
    float* dP = probs + blk * L;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / Hkv, kvh = i % Hkv;
      const float* K = k_all + i * L * hd;
      const float* V = v_all + i * L * hd;
      float* dK = dk[b * L] + kvh * hd;
      float* dV = dv[b * L] + kvh * hd;
      for (int64_t t = 0; t < L; ++t) {
        std::memset(dK + t * dk.ld, 0, hd * sizeof(float));
        std::memset(dV + t * dv.ld, 0, hd * sizeof(float));
      }
      for (int64_t h = kvh * hpg; h < (kvh + 1) * hpg; ++h)
        for (int64_t t0 = 0; t0 < L; t0 += blk) {
          const int64_t nb = std::min(blk, L - t0), keys = t0 + nb;
          const float* Qb = q[b * L + t0] + h * hd;
          const float* Ob = out[b * L + t0] + h * hd;
          const float* dOb = dout[b * L + t0] + h * hd;
          gemm(false, true, nb, keys, hd, a.scale, Qb, q.ld, K, hd, 0.f, probs, keys);
          for (int64_t r = 0; r < nb; ++r) softmax_prefix(probs + r * keys, t0 + r + 1, keys);
          gemm(false, true, nb, keys, hd, 1.f, dOb, dout.ld, V, hd, 0.f, dP, keys);
          for (int64_t r = 0; r < nb; ++r) {
            double delta = 0;  // rowsum(P o dP) = dO . O
            for (int64_t d = 0; d < hd; ++d)
              delta += static_cast<double>(dOb[r * dout.ld + d]) * Ob[r * out.ld + d];
            const float* pr = probs + r * keys;
            float* ds = dP + r * keys;
            for (int64_t j = 0; j < keys; ++j) ds[j] = pr[j] * static_cast<float>(ds[j] - delta);
          }
          gemm(false, false, nb, hd, keys, a.scale, dP, keys, K, hd, 0.f, dq[b * L + t0] + h * hd,
               dq.ld);
          gemm(true, false, keys, hd, nb, a.scale, dP, keys, Qb, q.ld, 1.f, dK, dk.ld);
          gemm(true, false, keys, hd, nb, 1.f, probs, keys, dOb, dout.ld, 1.f, dV, dv.ld);
        }
    }
  });
}

void rope_backward(Context& ctx, const ops::RopeBackwardArgs& a) {
  const int64_t half = a.inv_freq.numel(), L = a.dq.dim(1), hd = a.head_dim;
  if (half == 0) return;
  const float* inv_freq = a.inv_freq.data<float>();
  const ops::Rows<float> dq(a.dq), dk(a.dk);
  ctx.pool().parallel_for(a.dq.rows(), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t pos = row % L;
      for (int64_t i = 0; i < half; ++i) {
        // The angle as the forward forms it (the product in double).
        const double angle = static_cast<double>(pos) * inv_freq[i];
        const float c = static_cast<float>(std::cos(angle)),
                    s = static_cast<float>(std::sin(angle));
        // Rotating the gradient by -angle: the pair's own rotation with sin negated.
        for (int64_t h = 0; h < a.heads; ++h)
          ops::rotate_pair(dq[row] + h * hd, i, i + half, c, -s);
        for (int64_t h = 0; h < a.kv_heads; ++h)
          ops::rotate_pair(dk[row] + h * hd, i, i + half, c, -s);
      }
    }
  });
}

}  // namespace ssm::cpu
