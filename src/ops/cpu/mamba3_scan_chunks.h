// The chunked form of the cpu mamba3_scan (mamba3_scan.cpp) in its steps,
// shared with the fused prepare and scan (mamba3_prepare_scan.cpp), which
// hands each chunk its q, k and v from its own buffers: per (batch row,
// head) i, scan_head_begin, then scan_chunk for t0 = 0, Q, 2Q, ... in
// order, then scan_head_end.
#pragma once

#include <cstdint>

#include "ops/cpu/mamba3_scan_common.h"

namespace ssm::cpu::m3 {

// Per part: the buffers of one (batch row, head) at a time; Q time steps a
// chunk, M = Q R rows. With BF16 products (bf16: the view's
// bf16_products), the head's state transposed, St (N, P), while its chunks
// run, each row's decay, and the products' words (x86_bf16_pairs.cpp): q's
// (M, Nw), St's (Nw, P), k's and the weighted v's (Mw, N) and (Mw, P), and
// the chunk's: the scores' workspace, v's (Mw, P) and the scores' (M, Mw).
struct ScanWorkspace {
  int64_t Q, M, P, N, L;
  bool bf16 = false;
  float *scores, *decay, *qs, *vw, *w, *cs, *cs_rows, *w_rows;
  float *St = nullptr, *e_rows = nullptr;
  uint32_t *q_words = nullptr, *s_words = nullptr, *k_words = nullptr, *v_words = nullptr;
  // The chunk's products in BF16: the scores' workspace, v's row pairs and
  // the masked scores' words.
  uint32_t *score_work = nullptr, *v_pairs = nullptr, *masked_words = nullptr;
  void carve(Carver<float>& f, Carver<double>&) {
    scores = f.take(M * M);
    decay = f.take(M);
    qs = f.take(M * N);
    vw = f.take(M * P);
    w = f.take(L);
    cs = f.take(Q);
    cs_rows = f.take(M);
    w_rows = f.take(M);
    if (!bf16) return;
    const int64_t Nw = (N + 1) / 2, Mw = (M + 1) / 2;
    St = f.take(N * P);
    e_rows = f.take(M);
    q_words = reinterpret_cast<uint32_t*>(f.take(M * Nw));
    s_words = reinterpret_cast<uint32_t*>(f.take(Nw * P));
    k_words = reinterpret_cast<uint32_t*>(f.take(Mw * N));
    v_words = reinterpret_cast<uint32_t*>(f.take(Mw * P));
    score_work = reinterpret_cast<uint32_t*>(f.take(2 * M * Nw));
    v_pairs = reinterpret_cast<uint32_t*>(f.take(Mw * P));
    masked_words = reinterpret_cast<uint32_t*>(f.take(M * Mw));
  }
};

// Time steps a chunk of `chunk` rows holds.
int64_t scan_chunk_steps(const ScanView& a, int64_t chunk);
// The weights w of i (all steps' dt and lam must be written) and S'_{-1}.
void scan_head_begin(const ScanView& a, int64_t i, const ScanWorkspace& ws);
// Steps [t0, t0 + Q) (fewer at the end) of i, whose q, k, v rows are Qc,
// Kc, Vc: their outputs o, and the state carried past them.
void scan_chunk(const ScanView& a, int64_t i, int64_t t0, const float* Qc, const float* Kc,
                const float* Vc, const ScanWorkspace& ws);
// k_prev and v_prev of i from its last step's k and v (and its state from
// St with BF16 products).
void scan_head_end(const ScanView& a, int64_t i, const float* k_last, const float* v_last,
                   const ScanWorkspace& ws);

}  // namespace ssm::cpu::m3
