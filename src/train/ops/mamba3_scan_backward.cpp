// Chunked Mamba-3 scan backward. The forward's folding (cpu/mamba3_scan.cpp)
// turns the trapezoid into an SSD recurrence on the look-ahead state
//   S'_t = exp(a_t) S'_{t-1} + w_t u_t,   u_t = sum_r v_t,r k_t,r^T,
//   o_t,r = S'_t q_t,r - c_t u_t q_t,r + D v_t,r,
// with a_t = A_t dt_t, gamma_t = lam_t dt_t, c_t = (1 - lam_{t+1}) dt_{t+1}
// (0 at the last step) and w_t = gamma_t + c_t. Inside a chunk, with cs the
// cumulative sum of a, the weight of (t, s) is W_ts = exp(cs_t - cs_s) w_s
// for s < t and gamma_t on the diagonal. Per (batch row, head): a forward
// sweep keeps S' at each chunk start; a reverse sweep carries dS' back
// through the intra-chunk products, the carried state and the state update,
// collecting da, dw and dgamma per step, which then become ddt, dA and dlam.
// Every exponent is <= 0, as in the forward.
#include "ssm/train/ops/mamba3_scan_backward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/ops/gemm.h"

namespace ssm::ops {
namespace {

// exp of a log-decay (<= 0), flushed to zero below e^-80 as the forward does:
// such a weight cannot matter, and the subnormal floats it would feed are slow.
float decay_weight(double log_decay) {
  return log_decay < -80.0 ? 0.f : static_cast<float>(std::exp(log_decay));
}

struct Workspace {
  std::vector<float> states, S, dS, dS_new, scores, M, dM, ed, wd, G1, G2, G3, qs, vw, w;
  std::vector<double> cs, dcs, dwd, dw, dgamma, da;
};

double dot(const float* x, const float* y, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * y[k];
  return s;
}

// One (batch row, head) i: a contiguous run of L*R rows. Returns dD's part.
double backward_head(const Mamba3ScanArgs& a, const float* dout, const Mamba3ScanGrads& g,
                     int64_t i, int64_t Q, Workspace& ws) {
  const int64_t L = a.length, P = a.headdim, N = a.d_state, R = a.rank, nc = (L + Q - 1) / Q;
  const float* dt = a.dt + i * L;
  const float* A = a.A + i * L;
  const float* lam = a.lam + i * L;
  const float Dh = a.D ? a.D[i % a.heads] : 0.f;
  float* w = ws.w.data();
  for (int64_t s = 0; s < L; ++s)
    w[s] = lam[s] * dt[s] + (s + 1 < L ? (1.f - lam[s + 1]) * dt[s + 1] : 0.f);
  double* cs = ws.cs.data();
  auto cumsum = [&](int64_t t0, int64_t q) {
    double run = 0;
    for (int64_t t = 0; t < q; ++t) cs[t] = run += static_cast<double>(A[t0 + t]) * dt[t0 + t];
  };

  // Forward sweep: S' entering each chunk; S'_{-1} = S + (1 - lam_0) dt_0 V_prev^T K_prev.
  float* S = ws.S.data();
  const float* k_prev = a.ssm ? a.k_prev + i * R * N : nullptr;
  const float* v_prev = a.ssm ? a.v_prev + i * R * P : nullptr;
  if (a.ssm) {
    std::memcpy(S, a.ssm + i * P * N, P * N * sizeof(float));
    gemm(true, false, P, N, R, (1.f - lam[0]) * dt[0], v_prev, P, k_prev, N, 1.f, S, N);
  } else {
    std::fill(S, S + P * N, 0.f);
  }
  for (int64_t c = 0; c < nc; ++c) {
    std::memcpy(ws.states.data() + c * P * N, S, P * N * sizeof(float));
    if (c == nc - 1) break;
    const int64_t t0 = c * Q, q = std::min(Q, L - t0), m = q * R;
    cumsum(t0, q);
    const float* Vc = a.v + (i * L + t0) * R * P;
    for (int64_t row = 0; row < m; ++row) {
      const int64_t s = row / R;
      const float e = decay_weight(cs[q - 1] - cs[s]) * w[t0 + s];
      for (int64_t p = 0; p < P; ++p) ws.vw[row * P + p] = Vc[row * P + p] * e;
    }
    gemm(true, false, P, N, m, 1.f, ws.vw.data(), P, a.k + (i * L + t0) * R * N, N,
         decay_weight(cs[q - 1]), S, N);
  }

  std::fill(ws.dw.begin(), ws.dw.begin() + L, 0.0);
  std::fill(ws.dgamma.begin(), ws.dgamma.begin() + L, 0.0);
  std::fill(ws.dS.begin(), ws.dS.end(), 0.f);
  double dD_acc = 0;
  double* dcs = ws.dcs.data();
  double* dwd = ws.dwd.data();
  float *scores = ws.scores.data(), *M = ws.M.data(), *dM = ws.dM.data();
  float *ed = ws.ed.data(), *wd = ws.wd.data();
  float *G1 = ws.G1.data(), *G2 = ws.G2.data(), *G3 = ws.G3.data(), *qs = ws.qs.data();
  for (int64_t c = nc - 1; c >= 0; --c) {
    const int64_t t0 = c * Q, q = std::min(Q, L - t0), m = q * R;
    const float* Qc = a.q + (i * L + t0) * R * N;
    const float* Kc = a.k + (i * L + t0) * R * N;
    const float* Vc = a.v + (i * L + t0) * R * P;
    const float* dO = dout + (i * L + t0) * R * P;
    float* dQ = g.dq + (i * L + t0) * R * N;
    float* dK = g.dk + (i * L + t0) * R * N;
    float* dV = g.dv + (i * L + t0) * R * P;
    cumsum(t0, q);
    std::fill(dcs, dcs + q, 0.0);

    // Skip term o += D v.
    for (int64_t j = 0; j < m * P; ++j) {
      dV[j] = Dh * dO[j];
      dD_acc += static_cast<double>(dO[j]) * Vc[j];
    }

    // Intra-chunk: O = (Q K^T o W) V, W expanded over the rank pairs.
    for (int64_t t = 0; t < q; ++t)
      for (int64_t s = 0; s < q; ++s) {
        ed[t * q + s] = s < t ? decay_weight(cs[t] - cs[s]) : 0.f;
        wd[t * q + s] = s < t ? ed[t * q + s] * w[t0 + s] : s == t ? lam[t0 + t] * dt[t0 + t] : 0.f;
      }
    gemm(false, true, m, m, N, 1.f, Qc, N, Kc, N, 0.f, scores, m);
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = 0; col < m; ++col)
        M[row * m + col] = scores[row * m + col] * wd[(row / R) * q + col / R];
    gemm(true, false, m, P, m, 1.f, M, m, dO, P, 1.f, dV, P);
    gemm(false, true, m, m, P, 1.f, dO, P, Vc, P, 0.f, dM, m);
    std::fill(dwd, dwd + q * q, 0.0);
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = 0; col < m; ++col) {
        const int64_t ts = (row / R) * q + col / R;
        dwd[ts] += static_cast<double>(dM[row * m + col]) * scores[row * m + col];
        dM[row * m + col] *= wd[ts];  // now d(scores)
      }
    gemm(false, false, m, N, m, 1.f, dM, m, Kc, N, 0.f, dQ, N);
    gemm(true, false, m, N, m, 1.f, dM, m, Qc, N, 0.f, dK, N);
    for (int64_t t = 0; t < q; ++t) {
      for (int64_t s = 0; s < t; ++s) {
        const double e = ed[t * q + s], v = dwd[t * q + s] * e * w[t0 + s];
        dcs[t] += v;
        dcs[s] -= v;
        ws.dw[t0 + s] += dwd[t * q + s] * e;
      }
      ws.dgamma[t0 + t] += dwd[t * q + t];
    }

    // Carried state: o_t += exp(cs_t) S'_prev q_t.
    const float* Sprev = ws.states.data() + c * P * N;
    gemm(false, false, m, N, P, 1.f, dO, P, Sprev, N, 0.f, G1, N);
    for (int64_t row = 0; row < m; ++row) {
      const int64_t t = row / R;
      const float e = decay_weight(cs[t]);
      for (int64_t n = 0; n < N; ++n) {
        dQ[row * N + n] += e * G1[row * N + n];
        qs[row * N + n] = e * Qc[row * N + n];
      }
      dcs[t] += e * dot(G1 + row * N, Qc + row * N, N);
    }

    // State update, with dS the gradient of S' leaving the chunk.
    const double end = cs[q - 1];
    const float decay = decay_weight(end);
    float* dS = ws.dS.data();
    gemm(false, false, m, N, P, 1.f, Vc, P, dS, N, 0.f, G2, N);
    gemm(false, true, m, P, N, 1.f, Kc, N, dS, N, 0.f, G3, P);
    for (int64_t row = 0; row < m; ++row) {
      const int64_t s = row / R;
      const double e = decay_weight(end - cs[s]), coef = e * w[t0 + s];
      for (int64_t n = 0; n < N; ++n) dK[row * N + n] += static_cast<float>(coef * G2[row * N + n]);
      for (int64_t p = 0; p < P; ++p) dV[row * P + p] += static_cast<float>(coef * G3[row * P + p]);
      const double dcoef = dot(G2 + row * N, Kc + row * N, N);
      ws.dw[t0 + s] += dcoef * e;
      dcs[q - 1] += dcoef * coef;
      dcs[s] -= dcoef * coef;
    }
    dcs[q - 1] += decay * dot(dS, Sprev, P * N);
    float* dS_new = ws.dS_new.data();
    for (int64_t k = 0; k < P * N; ++k) dS_new[k] = decay * dS[k];
    gemm(true, false, P, N, m, 1.f, dO, P, qs, N, 1.f, dS_new, N);
    std::swap(ws.dS, ws.dS_new);

    // cs_t = sum_{k<=t} a_k.
    double run = 0;
    for (int64_t t = q - 1; t >= 0; --t) ws.da[t0 + t] = run += dcs[t];
  }

  // The carried-in previous step enters S'_{-1} with weight c_{-1} = (1 - lam_0) dt_0.
  double dc_first = 0;
  if (a.ssm)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t p = 0; p < P; ++p)
        dc_first += v_prev[r * P + p] * dot(ws.dS.data() + p * N, k_prev + r * N, N);

  // w_s = gamma_s + c_s; gamma_s = lam_s dt_s; c_{s-1} = (1 - lam_s) dt_s; a_s = A_s dt_s.
  float* ddt = g.ddt + i * L;
  float* dA = g.dA + i * L;
  float* dlam = g.dlam + i * L;
  for (int64_t s = 0; s < L; ++s) {
    const double dgam = ws.dgamma[s] + ws.dw[s];
    const double dc = s > 0 ? ws.dw[s - 1] : dc_first;
    ddt[s] = static_cast<float>(ws.da[s] * A[s] + dgam * lam[s] + dc * (1.0 - lam[s]));
    dlam[s] = static_cast<float>((dgam - dc) * dt[s]);
    dA[s] = static_cast<float>(ws.da[s] * dt[s]);
  }
  return dD_acc;
}

}  // namespace

void mamba3_scan_backward(const Mamba3ScanArgs& a, const float* dout, const Mamba3ScanGrads& g,
                          ThreadPool& pool) {
  const int64_t L = a.length, P = a.headdim, N = a.d_state, R = a.rank;
  if (L == 0 || a.batch * a.heads == 0) return;
  SSM_CHECK(!a.ssm == !a.k_prev && !a.ssm == !a.v_prev,
            "mamba3_scan_backward: the starting state needs ssm, k_prev and v_prev together");
  const int64_t Q = std::clamp<int64_t>(a.chunk / R, 1, L), M = Q * R, nc = (L + Q - 1) / Q;
  std::vector<double> dD_part(a.batch * a.heads, 0.0);
  pool.parallel_for(a.batch * a.heads, [&](int64_t i0, int64_t i1) {
    Workspace ws;
    ws.states.resize(nc * P * N);
    ws.S.resize(P * N);
    ws.dS.resize(P * N);
    ws.dS_new.resize(P * N);
    for (auto* v : {&ws.scores, &ws.M, &ws.dM}) v->resize(M * M);
    ws.ed.resize(Q * Q);
    ws.wd.resize(Q * Q);
    ws.dwd.resize(Q * Q);
    for (auto* v : {&ws.G1, &ws.G2, &ws.qs}) v->resize(M * N);
    ws.G3.resize(M * P);
    ws.vw.resize(M * P);
    ws.w.resize(L);
    ws.cs.resize(Q);
    ws.dcs.resize(Q);
    for (auto* v : {&ws.dw, &ws.dgamma, &ws.da}) v->resize(L);
    for (int64_t i = i0; i < i1; ++i) dD_part[i] = backward_head(a, dout, g, i, Q, ws);
  });
  if (g.dD)
    for (int64_t h = 0; h < a.heads; ++h) {
      double s = 0;
      for (int64_t b = 0; b < a.batch; ++b) s += dD_part[b * a.heads + h];
      g.dD[h] += static_cast<float>(s);
    }
}

}  // namespace ssm::ops
