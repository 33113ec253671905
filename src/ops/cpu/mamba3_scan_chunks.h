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
// chunk, M = Q R rows.
struct ScanWorkspace {
  int64_t Q, M, P, N, L;
  float *scores, *decay, *qs, *vw, *w, *cs, *cs_rows, *w_rows;
  void carve(Carver<float>& f, Carver<double>&) {
    scores = f.take(M * M);
    decay = f.take(M);
    qs = f.take(M * N);
    vw = f.take(M * P);
    w = f.take(L);
    cs = f.take(Q);
    cs_rows = f.take(M);
    w_rows = f.take(M);
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
// k_prev and v_prev of i from its last step's k and v.
void scan_head_end(const ScanView& a, int64_t i, const float* k_last, const float* v_last);

}  // namespace ssm::cpu::m3
