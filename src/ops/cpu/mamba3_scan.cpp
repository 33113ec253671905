// Chunked Mamba-3 scan (SPEC §4). The trapezoid folds into the Mamba-2 SSD
// form: with c_s = (1 - lam_{s+1}) dt_{s+1} (0 at the last step of the
// sequence), the look-ahead state S'_t = S_t + c_t u_t, u_t = sum_r v_t,r k_t,r^T,
// obeys the plain recurrence S'_t = exp(a_t) S'_{t-1} + w_t u_t with
// w_t = gamma_t + c_t and a_t = A_t dt_t, and o_t = S'_t q_t - c_t u_t q_t.
// Inside a chunk the weight of u_s in o_t is exp(cs_t - cs_s) w_s for s < t
// and exp(0) (w_t - c_t) = gamma_t on the diagonal. A saved state enters as
// S'_{-1} = S + c_{-1} u_prev with c_{-1} = (1 - lam_0) dt_0, and the last
// S' equals S because c vanishes at the end. With MIMO every (time, rank)
// pair is one row of the chunk's matrices. Every exponent is <= 0.
#include "ssm/ops/mamba3_scan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ssm/ops/gemm.h"

namespace ssm::ops {
namespace {

// exp of a log-decay (always <= 0), flushed to zero below e^-80 (still a
// normal float): such a weight cannot matter next to terms of order one, and
// the subnormal products it would feed are slow on some CPUs.
inline float decay_weight(float log_decay) { return log_decay < -80.f ? 0.f : std::exp(log_decay); }

struct Workspace {
  std::vector<float> scores, decay, qs, vw, w, cs;
};

// One (batch row, head): a contiguous run of L*R rows.
void scan_head(const Mamba3ScanArgs& a, int64_t i, int64_t Q, Workspace& ws) {
  const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, R = a.rank;
  const float* dt = a.dt + i * L;
  const float* A = a.A + i * L;
  const float* lam = a.lam + i * L;
  float* S = a.ssm + i * P * N;
  float* k_prev = a.k_prev + i * R * N;
  float* v_prev = a.v_prev + i * R * P;
  float* w = ws.w.data();
  for (int64_t s = 0; s < L; ++s)
    w[s] = lam[s] * dt[s] + (s + 1 < L ? (1.f - lam[s + 1]) * dt[s + 1] : 0.f);

  // S'_{-1} = S + (1 - lam_0) dt_0 V_prev^T K_prev.
  gemm(true, false, P, N, R, (1.f - lam[0]) * dt[0], v_prev, P, k_prev, N, 1.f, S, N);

  float* scores = ws.scores.data();
  float* decay = ws.decay.data();
  float* qs = ws.qs.data();
  float* vw = ws.vw.data();
  float* cs = ws.cs.data();
  for (int64_t t0 = 0; t0 < L; t0 += Q) {
    const int64_t q = std::min(Q, L - t0), m = q * R;
    const float* Qc = a.q + (i * L + t0) * R * N;
    const float* Kc = a.k + (i * L + t0) * R * N;
    const float* Vc = a.v + (i * L + t0) * R * P;
    float* Y = a.o + (i * L + t0) * R * P;
    float run = 0.f;
    for (int64_t t = 0; t < q; ++t) cs[t] = run += A[t0 + t] * dt[t0 + t];

    // Intra-chunk: Y = (Q K^T o decay) V.
    for (int64_t t = 0; t < q; ++t) {
      for (int64_t s = 0; s < t; ++s) decay[t * q + s] = decay_weight(cs[t] - cs[s]) * w[t0 + s];
      decay[t * q + t] = lam[t0 + t] * dt[t0 + t];
    }
    gemm(false, true, m, m, N, 1.f, Qc, N, Kc, N, 0.f, scores, m);
    // Row (t, r_out), column (s, r_in): loops over time and rank, no division.
    for (int64_t t = 0; t < q; ++t) {
      const float* d = decay + t * q;
      for (int64_t ro = 0; ro < R; ++ro) {
        float* sc = scores + (t * R + ro) * m;
        for (int64_t s = 0; s <= t; ++s)
          for (int64_t ri = 0; ri < R; ++ri) sc[s * R + ri] *= d[s];
        std::fill(sc + (t + 1) * R, sc + m, 0.f);
      }
    }
    gemm(false, false, m, P, m, 1.f, scores, m, Vc, P, 0.f, Y, P);

    // Carried state: o_t += exp(cs_t) S' q_t.
    for (int64_t t = 0; t < q; ++t) {
      const float e = decay_weight(cs[t]);
      for (int64_t j = t * R * N; j < (t + 1) * R * N; ++j) qs[j] = Qc[j] * e;
    }
    gemm(false, true, m, P, N, 1.f, qs, N, S, N, 1.f, Y, P);

    // S' <- exp(cs_end) S' + sum_s exp(cs_end - cs_s) w_s u_s.
    const float end = cs[q - 1];
    for (int64_t s = 0; s < q; ++s) {
      const float e = decay_weight(end - cs[s]) * w[t0 + s];
      for (int64_t j = s * R * P; j < (s + 1) * R * P; ++j) vw[j] = Vc[j] * e;
    }
    gemm(true, false, P, N, m, 1.f, vw, P, Kc, N, decay_weight(end), S, N);

    if (a.D) {
      const float D = a.D[i % H];
      for (int64_t j = 0; j < m * P; ++j) Y[j] += D * Vc[j];
    }
  }
  const int64_t last = i * L + L - 1;
  std::copy(a.k + last * R * N, a.k + (last + 1) * R * N, k_prev);
  std::copy(a.v + last * R * P, a.v + (last + 1) * R * P, v_prev);
}

}  // namespace

void mamba3_scan_chunked(const Mamba3ScanArgs& a, ThreadPool& pool) {
  const int64_t L = a.length, R = a.rank;
  if (L == 0) return;
  // The chunk counts rows, so MIMO chunks hold chunk / R time steps.
  const int64_t Q = std::clamp<int64_t>(a.chunk / R, 1, L), M = Q * R;
  pool.parallel_for(a.batch * a.heads, [&](int64_t i0, int64_t i1) {
    Workspace ws;
    ws.scores.resize(M * M);
    ws.decay.resize(Q * Q);
    ws.qs.resize(M * a.d_state);
    ws.vw.resize(M * a.headdim);
    ws.w.resize(L);
    ws.cs.resize(Q);
    for (int64_t i = i0; i < i1; ++i) scan_head(a, i, Q, ws);
  });
}

}  // namespace ssm::ops
