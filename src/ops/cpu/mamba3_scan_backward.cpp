// mamba3_scan_backward on the cpu, the chunked form. The forward's folding
// (mamba3_scan.cpp) turns the trapezoid into an SSD recurrence on the
// look-ahead state
//   S'_t = exp(a_t) S'_{t-1} + w_t u_t,   u_t = sum_r v_t,r k_t,r^T,
//   o_t,r = S'_t q_t,r - c_t u_t q_t,r + D v_t,r,
// with a_t = A_t dt_t, gamma_t = lam_t dt_t, c_t = (1 - lam_{t+1}) dt_{t+1}
// (0 at the last step) and w_t = gamma_t + c_t. Inside a chunk, with cs the
// cumulative sum of a, the weight of (t, s) is W_ts = exp(cs_t - cs_s) w_s
// for s < t and gamma_t on the diagonal. Per (batch row, head): a forward
// sweep keeps S' at each chunk start (memory stays bounded: nothing inside a
// chunk is kept); a reverse sweep carries dS' back through the intra-chunk
// products, the carried state and the state update, collecting da, dw and
// dgamma per step, which then become ddt, dA and dlam. Every exponent is
// <= 0, as in the forward.
#include <algorithm>
#include <cstring>

#include "ops/cpu/blas.h"
#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_scan_common.h"

namespace ssm::cpu {

using namespace m3;

namespace {

struct BackwardWorkspace {
  int64_t Q, M, P, N, L, chunks;
  float *states, *S, *dS, *dS_new, *scores, *Mw, *dM, *ed, *wd, *G1, *G2, *G3, *qs, *vw, *w;
  double *cs, *dcs, *dwd, *dw, *dgamma, *da;
  void carve(Carver<float>& f, Carver<double>& d) {
    states = f.take(chunks * P * N);
    for (float** p : {&S, &dS, &dS_new}) *p = f.take(P * N);
    for (float** p : {&scores, &Mw, &dM}) *p = f.take(M * M);
    for (float** p : {&ed, &wd}) *p = f.take(Q * Q);
    for (float** p : {&G1, &G2, &qs}) *p = f.take(M * N);
    for (float** p : {&G3, &vw}) *p = f.take(M * P);
    w = f.take(L);
    for (double** p : {&cs, &dcs}) *p = d.take(Q);
    dwd = d.take(Q * Q);
    for (double** p : {&dw, &dgamma, &da}) *p = d.take(L);
  }
};

struct Grads {
  const float* d_o;
  float *dq, *dk, *dv, *ddt, *dA, *dlam;
};

double dot(const float* x, const float* y, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * y[k];
  return s;
}

// Forward sweep of one (batch row, head) i: S' entering each chunk, with
// S'_{-1} = S + (1 - lam_0) dt_0 V_prev^T K_prev.
void chunk_states(const ScanView& a, int64_t i, const BackwardWorkspace& ws) {
  const int64_t L = a.L, P = a.P, N = a.N, R = a.R, Q = ws.Q;
  const float *dt = a.dt + i * L, *A = a.A + i * L, *lam = a.lam + i * L;
  float* S = ws.S;
  if (a.ssm) {
    std::memcpy(S, a.ssm + i * P * N, P * N * sizeof(float));
    gemm(true, false, P, N, R, (1.f - lam[0]) * dt[0], a.v_prev + i * R * P, P,
         a.k_prev + i * R * N, N, 1.f, S, N);
  } else {
    std::fill(S, S + P * N, 0.f);
  }
  for (int64_t c = 0; c < ws.chunks; ++c) {
    std::memcpy(ws.states + c * P * N, S, P * N * sizeof(float));
    if (c == ws.chunks - 1) break;
    const int64_t t0 = c * Q, q = std::min(Q, L - t0), m = q * R;
    double run = 0;
    for (int64_t t = 0; t < q; ++t) ws.cs[t] = run += static_cast<double>(A[t0 + t]) * dt[t0 + t];
    const float* Vc = a.v + (i * L + t0) * R * P;
    for (int64_t row = 0; row < m; ++row) {
      const int64_t s = row / R;
      const float e = decay_weight(ws.cs[q - 1] - ws.cs[s]) * ws.w[t0 + s];
      for (int64_t p = 0; p < P; ++p) ws.vw[row * P + p] = Vc[row * P + p] * e;
    }
    gemm(true, false, P, N, m, 1.f, ws.vw, P, a.k + (i * L + t0) * R * N, N,
         decay_weight(ws.cs[q - 1]), S, N);
  }
}

// One (batch row, head) i: a contiguous run of L*R rows. Returns dD's part.
double backward_head(const ScanView& a, const Grads& g, int64_t i, BackwardWorkspace ws) {
  const int64_t L = a.L, P = a.P, N = a.N, R = a.R, Q = ws.Q;
  const float *dt = a.dt + i * L, *A = a.A + i * L, *lam = a.lam + i * L;
  const float Dh = a.D ? a.D[i % a.H] : 0.f;
  float* w = ws.w;
  for (int64_t s = 0; s < L; ++s)
    w[s] = lam[s] * dt[s] + (s + 1 < L ? (1.f - lam[s + 1]) * dt[s + 1] : 0.f);
  double* cs = ws.cs;
  auto cumsum = [&](int64_t t0, int64_t q) {
    double run = 0;
    for (int64_t t = 0; t < q; ++t) cs[t] = run += static_cast<double>(A[t0 + t]) * dt[t0 + t];
  };
  chunk_states(a, i, ws);

  std::fill(ws.dw, ws.dw + L, 0.0);
  std::fill(ws.dgamma, ws.dgamma + L, 0.0);
  std::fill(ws.dS, ws.dS + P * N, 0.f);
  double dD_acc = 0;
  double *dcs = ws.dcs, *dwd = ws.dwd;
  float *scores = ws.scores, *M = ws.Mw, *dM = ws.dM, *ed = ws.ed, *wd = ws.wd;
  float *G1 = ws.G1, *G2 = ws.G2, *G3 = ws.G3, *qs = ws.qs;
  for (int64_t c = ws.chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * Q, q = std::min(Q, L - t0), m = q * R;
    const float* Qc = a.q + (i * L + t0) * R * N;
    const float* Kc = a.k + (i * L + t0) * R * N;
    const float* Vc = a.v + (i * L + t0) * R * P;
    const float* dO = g.d_o + (i * L + t0) * R * P;
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
    const float* Sprev = ws.states + c * P * N;
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
    float* dS = ws.dS;
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
    float* dS_new = ws.dS_new;
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
        dc_first +=
            a.v_prev[(i * R + r) * P + p] * dot(ws.dS + p * N, a.k_prev + (i * R + r) * N, N);

  // w_s = gamma_s + c_s; gamma_s = lam_s dt_s; c_{s-1} = (1 - lam_s) dt_s; a_s = A_s dt_s.
  float *ddt = g.ddt + i * L, *dA = g.dA + i * L, *dlam = g.dlam + i * L;
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

void mamba3_scan_backward(Context& ctx, const ops::Mamba3ScanBackwardArgs& args) {
  const ScanView a(args.fwd);
  const int64_t L = a.L, BH = a.B * a.H;
  if (L == 0 || BH == 0) return;
  const Grads g{args.d_o.data<float>(), out(args.dq), out(args.dk),  out(args.dv),
                out(args.ddt),          out(args.dA), out(args.dlam)};
  const int64_t Q = std::clamp<int64_t>(args.fwd.chunk / a.R, 1, L);
  const Parts parts = split(ctx, BH);
  const Slots<BackwardWorkspace> slots(
      ctx, parts, {.Q = Q, .M = Q * a.R, .P = a.P, .N = a.N, .L = L, .chunks = (L + Q - 1) / Q});
  double* dD_part = ctx.arena().alloc(DType::kF64, {BH}).data<double>();
  for_each_part(ctx, parts, [&](int64_t part, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dD_part[i] = backward_head(a, g, i, slots[part]);
  });
  if (!args.dD.defined()) return;
  // Summed over the batch in a fixed order, whatever the threads.
  for (int64_t h = 0; h < a.H; ++h) {
    double s = 0;
    for (int64_t b = 0; b < a.B; ++b) s += dD_part[b * a.H + h];
    out(args.dD)[h] += static_cast<float>(s);
  }
}

}  // namespace ssm::cpu
