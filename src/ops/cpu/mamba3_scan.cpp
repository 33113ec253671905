// mamba3_scan on the cpu (SPEC §4): the chunked form for prefill, the
// sequential recurrence for a single step (decoding: it allocates nothing).
//
// Chunked form: the trapezoid folds into the Mamba-2 SSD form. With
// c_s = (1 - lam_{s+1}) dt_{s+1} (0 at the last step of the sequence), the
// look-ahead state S'_t = S_t + c_t u_t, u_t = sum_r v_t,r k_t,r^T, obeys the
// plain recurrence S'_t = exp(a_t) S'_{t-1} + w_t u_t with w_t = gamma_t + c_t
// and a_t = A_t dt_t, and o_t = S'_t q_t - c_t u_t q_t. Inside a chunk the
// weight of u_s in o_t is exp(cs_t - cs_s) w_s for s < t and exp(0) (w_t -
// c_t) = gamma_t on the diagonal. A saved state enters as S'_{-1} = S +
// c_{-1} u_prev with c_{-1} = (1 - lam_0) dt_0, and the last S' equals S
// because c vanishes at the end. With MIMO every (time, rank) pair is one row
// of the chunk's matrices. Every exponent is <= 0.
#include <algorithm>
#include <cmath>

#include "ops/cpu/blas.h"
#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_scan_chunks.h"
#include "ops/cpu/mamba3_scan_common.h"
#include "ops/cpu/mamba3_workspace.h"
#include "ops/cpu/step_kernels.h"
#include "ops/cpu/vec_math.h"

namespace ssm::cpu {

using namespace m3;

namespace m3 {
namespace {

// scan_chunk's state products with BF16 inputs on St (N, P), the state
// transposed, with e (ws.decay) holding decay_weight(cs_t) and ws.q_words
// q's words: the same terms as the F32 products below, with each row of q
// and of the weighted v rounded to BF16 in pairs (x86_bf16_pairs.cpp).
void bf16_state_products(const ScanView& a, int64_t t0, const float* Kc, const float* Vc, float* Y,
                         const ScanWorkspace& ws) {
  const int64_t P = a.P, N = a.N, R = a.R, Nw = (N + 1) / 2;
  const int64_t q = std::min(ws.Q, a.L - t0), m = q * R;
  float* e = ws.decay;
  // o_t,r += exp(cs_t) S' q_t,r: q's words (row, j; made for the scores)
  // against St's row pairs (j, p), each row times its step's weight.
  for (int64_t j = 0; j < m; ++j) ws.e_rows[j] = e[j / R];
  bf16_row_pairs(ws.St, P, nullptr, N, P, ws.s_words, P);
  bf16_pair_product(m, P, Nw, ws.q_words, Nw, 1, ws.s_words, P, ws.e_rows, 1.f, Y, P);
  // St <- exp(cs_end) St + sum_s k_s (exp(cs_end - cs_s) w_s v_s)^T: k's
  // column n over pairs of rows against the weighted v's rows in pairs.
  const float end = ws.cs[q - 1];
  decay_products(end, ws.cs, nullptr, ws.w + t0, e, q);
  for (int64_t j = 0; j < m; ++j) ws.e_rows[j] = e[j / R];
  bf16_row_pairs(Kc, N, nullptr, m, N, ws.k_words, N);
  bf16_row_pairs(Vc, P, ws.e_rows, m, P, ws.v_words, P);
  bf16_pair_product(N, P, (m + 1) / 2, ws.k_words, 1, N, ws.v_words, P, nullptr, decay_weight(end),
                    ws.St, P);
}

}  // namespace

void scan_head_begin(const ScanView& a, int64_t i, const ScanWorkspace& ws) {
  const int64_t L = a.L, P = a.P, N = a.N, R = a.R;
  const float* dt = a.dt + i * L;
  const float* lam = a.lam + i * L;
  float* w = ws.w;
  for (int64_t s = 0; s < L; ++s)
    w[s] = lam[s] * dt[s] + (s + 1 < L ? (1.f - lam[s + 1]) * dt[s + 1] : 0.f);
  // S'_{-1} = S + (1 - lam_0) dt_0 V_prev^T K_prev.
  gemm(true, false, P, N, R, (1.f - lam[0]) * dt[0], a.v_prev + i * R * P, P, a.k_prev + i * R * N,
       N, 1.f, a.ssm + i * P * N, N);
  if (ws.bf16) transpose_f32_avx512(a.ssm + i * P * N, N, P, N, ws.St, P);
}

void scan_chunk(const ScanView& a, int64_t i, int64_t t0, const float* Qc, const float* Kc,
                const float* Vc, const ScanWorkspace& ws) {
  const int64_t L = a.L, P = a.P, N = a.N, R = a.R;
  const int64_t q = std::min(ws.Q, L - t0), m = q * R;
  const float* dt = a.dt + i * L;
  const float* A = a.A + i * L;
  const float* lam = a.lam + i * L;
  const float* w = ws.w;
  float* S = a.ssm + i * P * N;
  float* Y = a.o + (i * L + t0) * R * P;
  float *scores = ws.scores, *decay = ws.decay, *qs = ws.qs, *vw = ws.vw, *cs = ws.cs;
  float *cs_rows = ws.cs_rows, *w_rows = ws.w_rows;
  float run = 0.f;
  for (int64_t t = 0; t < q; ++t) cs[t] = run += A[t0 + t] * dt[t0 + t];

  // Intra-chunk: Y = (Q K^T o decay) V, the scores only where gemm_causal
  // reads them. Column (s, r_in) of the decay row of step t is
  // decay_weight(cs_t - cs_s) w_s for s < t, lam_t dt_t for s = t: from
  // cs and w repeated per rank, so the masking is one product per score.
  for (int64_t j = 0; j < m; ++j) {
    cs_rows[j] = cs[j / R];
    w_rows[j] = w[t0 + j / R];
  }
  // The skip term D v_t,r joins the sum as D on the diagonal of the scores
  // (row (t, r), column (t, r)) rather than in a pass of its own.
  const float D = a.D ? a.D[i % a.H] : 0.f;
  if (ws.bf16) {
    // The scores and their product with v from BF16 inputs, as the state's
    // products (a model whose projections run in BF16 rounds its
    // activations anyway): twice the multiply-adds per instruction.
    bf16_row_words(Qc, N, nullptr, m, N, ws.q_words, (N + 1) / 2);
    bf16_causal_scores(m, N, R, ws.q_words, (N + 1) / 2, Kc, N, scores, m, ws.score_work);
  } else {
    gemm_causal_scores(m, N, R, Qc, N, Kc, N, scores, m);
  }
  for (int64_t t = 0; t < q; ++t) {
    decay_products(cs[t], cs_rows, nullptr, w_rows, decay, t * R);
    std::fill(decay + t * R, decay + (t + 1) * R, lam[t0 + t] * dt[t0 + t]);
    for (int64_t ro = 0; ro < R; ++ro) {
      float* sc = scores + (t * R + ro) * m;
      for (int64_t j = 0; j < (t + 1) * R; ++j) sc[j] *= decay[j];
      if (a.D) sc[t * R + ro] += D;
      std::fill(sc + (t + 1) * R, sc + causal_columns(t * R + ro, m, R), 0.f);
    }
  }
  if (ws.bf16) {
    bf16_row_pairs(Vc, P, nullptr, m, P, ws.v_pairs, P);
    bf16_causal_product(m, P, R, scores, m, ws.v_pairs, P, Y, P, ws.masked_words);
  } else {
    gemm_causal(m, P, R, scores, m, Vc, P, Y, P);
  }

  // Carried state: o_t += exp(cs_t) S' q_t.
  float* e = decay;  // used up: decay_weight(cs_t), then decay_weight(end - cs_s) w_s
  for (int64_t t = 0; t < q; ++t) e[t] = decay_weight(cs[t]);
  if (ws.bf16) return bf16_state_products(a, t0, Kc, Vc, Y, ws);
  scale_rows(Qc, R * N, e, q, R * N, qs, R * N);
  gemm(false, true, m, P, N, 1.f, qs, N, S, N, 1.f, Y, P);

  // S' <- exp(cs_end) S' + sum_s exp(cs_end - cs_s) w_s u_s.
  const float end = cs[q - 1];
  decay_products(end, cs, nullptr, w + t0, e, q);
  scale_rows(Vc, R * P, e, q, R * P, vw, R * P);
  gemm(true, false, P, N, m, 1.f, vw, P, Kc, N, decay_weight(end), S, N);
}

void scan_head_end(const ScanView& a, int64_t i, const float* k_last, const float* v_last,
                   const ScanWorkspace& ws) {
  if (ws.bf16) transpose_f32_avx512(ws.St, a.P, a.N, a.P, a.ssm + i * a.P * a.N, a.N);
  std::copy(k_last, k_last + a.R * a.N, a.k_prev + i * a.R * a.N);
  std::copy(v_last, v_last + a.R * a.P, a.v_prev + i * a.R * a.P);
}

int64_t scan_chunk_steps(const ScanView& a, int64_t chunk) {
  // The chunk counts rows, so MIMO chunks hold chunk / R time steps.
  return std::clamp<int64_t>(chunk / a.R, 1, a.L);
}

void step_head(const ScanView& a, int64_t i) {
  const int64_t L = a.L, P = a.P, N = a.N, R = a.R;
  const float D = a.D ? a.D[i % a.H] : 0.f;
  float* S = a.ssm ? a.ssm + i * P * N : nullptr;
  uint16_t* S16 = a.ssm16 ? a.ssm16 + i * P * N : nullptr;
  float* k_prev = a.k_prev + i * R * N;
  float* v_prev = a.v_prev + i * R * P;
  for (int64_t t = 0; t < L; ++t) {
    const int64_t step = i * L + t;
    const float dt = a.dt[step], lam = a.lam[step];
    const float alpha = std::exp(a.A[step] * dt);
    const float beta = (1.f - lam) * dt * alpha, gamma = lam * dt;
    const float* k = a.k + step * R * N;
    const float* v = a.v + step * R * P;
    mamba3_step_head({.P = P,
                      .N = N,
                      .R = R,
                      .alpha = alpha,
                      .beta = beta,
                      .gamma = gamma,
                      .D = D,
                      .q = a.q + step * R * N,
                      .k = k,
                      .v = v,
                      .k_prev = k_prev,
                      .v_prev = v_prev,
                      .o = a.o + step * R * P,
                      .S = S,
                      .S16 = S16});
    std::copy(k, k + R * N, k_prev);
    std::copy(v, v + R * P, v_prev);
  }
}

}  // namespace m3

namespace {

// One (batch row, head) i: a contiguous run of L*R rows; S, k_prev, v_prev
// its state, updated.
void scan_head(const ScanView& a, int64_t i, const ScanWorkspace& ws) {
  const int64_t L = a.L, R = a.R, N = a.N, P = a.P;
  scan_head_begin(a, i, ws);
  for (int64_t t0 = 0; t0 < L; t0 += ws.Q)
    scan_chunk(a, i, t0, a.q + (i * L + t0) * R * N, a.k + (i * L + t0) * R * N,
               a.v + (i * L + t0) * R * P, ws);
  const int64_t last = i * L + L - 1;
  scan_head_end(a, i, a.k + last * R * N, a.v + last * R * P, ws);
}

void scan_chunked(Context& ctx, const ScanView& a, int64_t chunk) {
  SSM_CHECK(!a.ssm16, "a BF16 state reaches the chunked scan widened (ops::mamba3_scan)");
  const int64_t Q = scan_chunk_steps(a, chunk);
  const Parts parts = split(ctx, a.B * a.H);
  const Slots<ScanWorkspace> slots(
      ctx, parts, {.Q = Q, .M = Q * a.R, .P = a.P, .N = a.N, .L = a.L, .bf16 = a.bf16_products});
  for_each_part(ctx, parts, [&](int64_t part, int64_t i0, int64_t i1) {
    const ScanWorkspace ws = slots[part];
    for (int64_t i = i0; i < i1; ++i) scan_head(a, i, ws);
  });
}

// The decode path: a head's steps, heads handed out while they run.
void scan_sequential(Context& ctx, const ScanView& a) {
  ctx.pool().parallel_for_dynamic(a.B * a.H, [&a](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) step_head(a, i);
  });
}

}  // namespace

void mamba3_scan(Context& ctx, const ops::Mamba3ScanArgs& args) {
  const ScanView a(ctx, args);
  if (a.L == 0 || a.B * a.H == 0) return;
  if (a.L == 1)
    scan_sequential(ctx, a);
  else
    scan_chunked(ctx, a, args.chunk);
}

}  // namespace ssm::cpu
