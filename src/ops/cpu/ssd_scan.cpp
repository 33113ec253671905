// Chunked SSD. Phase 1 forms, for every (batch row, group, chunk), the score
// matrix C B^T that all heads of the group share. Phase 2 runs each (batch
// row, head) through its chunks: intra-chunk outputs from the masked, decayed
// scores, the carried state's contribution, then the state update. Every
// exponent is a difference cs_t - cs_s with s <= t, hence <= 0. Each (batch
// row, head) is computed by the same code whatever the split, so results do
// not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "ops/cpu/blas.h"
#include "ops/cpu/ssd.h"
#include "ops/cpu/vec_math.h"
#include "ops/cpu/worker_slots.h"
#include "ops/cpu/x86_kernels.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

// exp of a segment sum (always <= 0). Below e^-80 the result is flushed to
// zero: it is invisible next to any fp32 sum, and subnormal products are
// many times slower on common CPUs.
inline float decay(float segment_sum) { return segment_sum < -80.f ? 0.f : std::exp(segment_sum); }

// The chunk this kernel runs, at most: the result is the same sum up to
// rounding for any chunk, and the intra-chunk products cost L Q P per head
// against 2 L P N for the state's, so the 256 of Mamba-2 configs (a GPU
// choice) spends most of the scan's time in the quadratic part. With 64
// (Mamba-3's default) the scan's share of a 130m prefill fell from 29% to
// 22% of the samples (perf, docs/CPU.md).
constexpr int64_t kMaxChunk = 64;

}  // namespace

void ssd_scan_chunked(Context& ctx, const ops::SsdScanArgs& a) {
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), H = a.A.dim(0), P = a.x.cols() / H;
  const int64_t G = a.groups, N = a.B.cols() / G;
  if (L == 0) return;
  const int64_t Q = std::max<int64_t>(1, std::min({a.chunk, kMaxChunk, L}));
  const int64_t n_chunks = (L + Q - 1) / Q;
  const int64_t ldx = a.x.row_stride(), ldb = a.B.row_stride(), ldc = a.C.row_stride();
  const int64_t ldt = a.dt.row_stride(), ldy = a.y.row_stride();
  const float* x = a.x.data<float>();
  const float* Bm = a.B.data<float>();
  const float* Cm = a.C.data<float>();
  const float* dtm = a.dt.data<float>();
  const float* A = a.A.data<float>();
  const float* D = ops::elements_or_null<float>(a.D);
  float* y = ops::elements<float>(a.y);
  Arena& arena = ctx.arena();
  // Without a state the sequence starts from zeros and its end is dropped.
  const Tensor state = a.state.defined() ? a.state : arena.zeros(DType::kF32, {Bn * H, P * N});

  // With BF16 state products (a model whose projections run in BF16), each
  // head's state is held transposed, St (N, P), while its chunks run, so
  // that both products take their operands as rows or pairs of rows
  // (x86_bf16_pairs.cpp); the state goes back to (P, N) after the last.
  // C's and B's words are the same for all heads of a group: they are made
  // once per chunk with the scores, and C's decay scales the product's rows.
  const bool bf16 = a.bf16_state_products && cpu_has_avx512() && cpu_bf16_dot_products_fast();
  const int64_t Nw = (N + 1) / 2, Qw = (Q + 1) / 2;
  const int64_t words_size = bf16 ? Q * Nw + Qw * N : 0;  // C's (Q, Nw), then B's (Qw, N)

  // scores[b][g][c] = C_chunk B_chunk^T, (q, q) in a (Q, Q) slot.
  const Tensor scores = arena.alloc(DType::kF32, {Bn * G * n_chunks, Q * Q + words_size});
  float* sc_all = ops::elements<float>(scores);
  const int64_t sc_size = Q * Q + words_size;
  ctx.pool().parallel_for(Bn * G * n_chunks, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % n_chunks, g = (i / n_chunks) % G, b = i / (n_chunks * G);
      const int64_t t0 = c * Q, q = std::min(Q, L - t0), row0 = b * L + t0;
      const float* Cc = Cm + row0 * ldc + g * N;
      const float* Bc = Bm + row0 * ldb + g * N;
      float* sc = sc_all + i * sc_size;
      gemm(false, true, q, q, N, 1.f, Cc, ldc, Bc, ldb, 0.f, sc, Q);
      if (!bf16) continue;
      uint32_t* Cw = reinterpret_cast<uint32_t*>(sc + Q * Q);
      bf16_row_words(Cc, ldc, nullptr, q, N, Cw, Nw);
      bf16_row_pairs(Bc, ldb, nullptr, q, N, Cw + Q * Nw, N);
    }
  });

  // Per worker: M (Q, Q), Cs (Q, N), Xw (Q, P), cs, dts, ws (Q each); for
  // BF16, St (N, P) and the words of St (Nw, P) and of x (Qw, P).
  const int64_t bf16_size = bf16 ? N * P + Nw * P + Qw * P : 0;
  const int64_t slot_size = Q * Q + Q * N + Q * P + 3 * Q + bf16_size;
  const Tensor scratch = arena.alloc(DType::kF32, {worker_slots(ctx.pool(), Bn * H), slot_size});
  parallel_for_slots(ctx.pool(), Bn * H, [&](int64_t slot, int64_t i0, int64_t i1) {
    float* M = ops::elements<float>(scratch) + slot * slot_size;
    float* Cs = M + Q * Q;
    float* Xw = Cs + Q * N;
    float* cs = Xw + Q * P;
    float* dts = cs + Q;  // dt of the chunk's steps, contiguous
    float* ws = dts + Q;
    float* St = ws + Q;
    uint32_t* Sw = reinterpret_cast<uint32_t*>(St + N * P);
    uint32_t* Xp = Sw + Nw * P;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, g = h / (H / G);
      float* S = ops::elements<float>(state) + i * P * N;
      if (bf16) transpose_f32_avx512(S, N, P, N, St, P);
      for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t t0 = c * Q, q = std::min(Q, L - t0), row0 = b * L + t0;
        const float* dt = dtm + row0 * ldt + h;
        const float* X = x + row0 * ldx + h * P;
        const float* Bc = Bm + row0 * ldb + g * N;
        const float* Cc = Cm + row0 * ldc + g * N;
        float* Y = y + row0 * ldy + h * P;
        float run = 0.f;
        for (int64_t t = 0; t < q; ++t) {
          dts[t] = dt[t * ldt];
          cs[t] = run += dts[t] * A[h];
        }

        // M[t][s] = sc[t][s] decay(cs_t - cs_s) dt_s for s < t, that plus D
        // on the diagonal (the skip term D x_t, summed with the rest rather
        // than in a pass of its own), 0 past it (as far as gemm_causal reads).
        const float* sc = sc_all + ((b * G + g) * n_chunks + c) * sc_size;
        causal_decay_matrix(cs, sc, Q, dts, D ? D + h : nullptr, q, M, q);
        gemm_causal(q, P, 1, M, q, X, ldx, Y, ldy);

        // Carried state: y_t += exp(cs_t) S C_t.
        for (int64_t t = 0; t < q; ++t) ws[t] = decay(cs[t]);
        const float end = cs[q - 1];
        if (bf16) {
          // C_t's words (t, j) against St's row pairs (j, p), row t times
          // exp(cs_t).
          const uint32_t* Cw = reinterpret_cast<const uint32_t*>(sc + Q * Q);
          bf16_row_pairs(St, P, nullptr, N, P, Sw, P);
          bf16_pair_product(q, P, Nw, Cw, Nw, 1, Sw, P, ws, 1.f, Y, ldy);
          // St <- exp(cs_end) St + sum_s B_s (exp(cs_end - cs_s) dt_s x_s)^T:
          // B's column n over pairs of steps against x's rows in pairs.
          decay_products(end, cs, nullptr, dts, ws, q);
          bf16_row_pairs(X, ldx, ws, q, P, Xp, P);
          bf16_pair_product(N, P, (q + 1) / 2, Cw + Q * Nw, 1, N, Xp, P, nullptr, decay(end), St,
                            P);
          continue;
        }
        scale_rows(Cc, ldc, ws, q, N, Cs, N);
        gemm(false, true, q, P, N, 1.f, Cs, N, S, N, 1.f, Y, ldy);

        // S <- exp(cs_end) S + sum_s exp(cs_end - cs_s) dt_s x_s B_s^T.
        decay_products(end, cs, nullptr, dts, ws, q);
        scale_rows(X, ldx, ws, q, P, Xw, P);
        gemm(true, false, P, N, q, 1.f, Xw, P, Bc, ldb, decay(end), S, N);
      }
      if (bf16) transpose_f32_avx512(St, P, N, P, S, N);
    }
  });
}

}  // namespace ssm::cpu
