// Chunked SSD backward. Work is split by (batch row, group): the heads of a
// group run one after another so that the gradient of the shared scores
// C B^T, and hence dB and dC, have a single writer. Per head: a forward
// sweep keeps the state at each chunk start, then a reverse sweep carries
// dS (the gradient of the state leaving the chunk) back through
//   intra   y_t += sum_{s<=t} (C_t.B_s) exp(cs_t - cs_s) dt_s x_s
//   carried y_t += exp(cs_t) S_prev C_t
//   update  S   = exp(cs_end) S_prev + sum_s exp(cs_end - cs_s) dt_s x_s B_s^T
// and finally through cs = cumsum(dt A). Exponents stay <= 0 as in the
// forward. Memory stays bounded: only chunk-boundary states are kept, and
// dA, dD are summed over batch rows in a fixed order after the loop, so
// nothing depends on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/cpu/blas.h"
#include "ops/cpu/ssd.h"
#include "ops/cpu/ssd_backward_rows.h"
#include "ops/cpu/ssd_pair_terms.h"
#include "ops/cpu/worker_slots.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

// The backward's arguments as raw pointers and row strides.
struct SsdBackwardView {
  int64_t L, H, P, N, G, Q;
  const float *x, *B, *C, *dt, *A, *D, *state, *dy;
  int64_t ldx, ldb, ldc, ldt, lddy;
  float *dx, *dB, *dC, *ddt;
  int64_t lddx, lddb, lddc, lddt;

  explicit SsdBackwardView(const ops::SsdScanBackwardArgs& a) {
    const ops::SsdScanArgs& f = a.fwd;
    L = f.x.dim(1), H = f.A.dim(0), G = f.groups, P = f.x.cols() / H, N = f.B.cols() / G;
    Q = std::max<int64_t>(1, std::min(f.chunk, L));
    x = f.x.data<float>(), B = f.B.data<float>(), C = f.C.data<float>(), dt = f.dt.data<float>();
    A = f.A.data<float>(), D = ops::elements_or_null<float>(f.D);
    state = ops::elements_or_null<float>(f.state), dy = a.dy.data<float>();
    ldx = f.x.row_stride(), ldb = f.B.row_stride(), ldc = f.C.row_stride();
    ldt = f.dt.row_stride(), lddy = a.dy.row_stride();
    dx = ops::elements<float>(a.dx), dB = ops::elements<float>(a.dB);
    dC = ops::elements<float>(a.dC), ddt = ops::elements<float>(a.ddt);
    lddx = a.dx.row_stride(), lddb = a.dB.row_stride(), lddc = a.dC.row_stride();
    lddt = a.ddt.row_stride();
  }
  int64_t n_chunks() const { return (L + Q - 1) / Q; }
  int64_t row0(int64_t b, int64_t c) const { return b * L + c * Q; }
  int64_t len(int64_t c) const { return std::min(Q, L - c * Q); }
};

// One worker's scratch, carved from a slot of floats and one of doubles.
struct SsdBackwardScratch {
  float *scores, *dCB, *states, *S, *dS, *dS_new, *M, *dM, *G1, *G2, *Cs, *G3, *Xw, *csf, *dtc;
  double *cs, *dcs, *ddt, *dots;

  // Floats of: scores, dCB, states (one per chunk), S, dS, dS_new, M, dM,
  // G1, G2, Cs, G3, Xw, csf (cs as floats), dtc (the chunk's dt contiguous);
  // in the order of the members above.
  static std::array<int64_t, 15> sizes(const SsdBackwardView& v) {
    const int64_t QQ = v.Q * v.Q, PN = v.P * v.N, nc = v.n_chunks(), QN = v.Q * v.N;
    return {nc * QQ, nc * QQ, nc * PN, PN, PN, PN, QQ, QQ, QN, QN, QN, v.Q * v.P, v.Q * v.P,
            v.Q, v.Q};
  }
  static int64_t floats(const SsdBackwardView& v) {
    const auto s = sizes(v);
    return std::accumulate(s.begin(), s.end(), int64_t{0});
  }
  SsdBackwardScratch(const SsdBackwardView& v, float* f, double* d) {
    float** parts[] = {&scores, &dCB, &states, &S,  &dS, &dS_new, &M,  &dM,
                       &G1,     &G2,  &Cs,     &G3, &Xw, &csf,    &dtc};
    const auto s = sizes(v);
    for (size_t i = 0; i < s.size(); ++i) {
      *parts[i] = f;
      f += s[i];
    }
    cs = d;
    dcs = d + v.Q;
    ddt = d + 2 * v.Q;
    dots = d + 3 * v.Q;
  }
  static constexpr int64_t kDoublesPerStep = 4;
};

// out[i] = sum over k < n in order of double(a[i][k]) b[i][k], for i < rows
// (rows lda and ldb apart), four rows' sums interleaved: each sum is a chain
// of dependent double additions, which one row at a time left the adder
// waiting on its latency.
void row_dots(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows, int64_t n,
              double* out) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
    const float *b0 = b + i * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t k = 0; k < n; ++k) {
      s0 += static_cast<double>(a0[k]) * b0[k];
      s1 += static_cast<double>(a1[k]) * b1[k];
      s2 += static_cast<double>(a2[k]) * b2[k];
      s3 += static_cast<double>(a3[k]) * b3[k];
    }
    out[i] = s0;
    out[i + 1] = s1;
    out[i + 2] = s2;
    out[i + 3] = s3;
  }
  for (; i < rows; ++i) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(a[i * lda + k]) * b[i * ldb + k];
    out[i] = sum;
  }
}

// cs of chunk c of head h (batch row b) into w.cs[0, q).
void cumsum(const SsdBackwardView& v, SsdBackwardScratch& w, int64_t b, int64_t h, int64_t c) {
  const float* dt = v.dt + v.row0(b, c) * v.ldt + h;
  float run = 0.f;
  for (int64_t t = 0; t < v.len(c); ++t) w.cs[t] = run += dt[t * v.ldt] * v.A[h];
}

// Forward sweep: the state entering each chunk into w.states.
void chunk_start_states(const SsdBackwardView& v, SsdBackwardScratch& w, int64_t b, int64_t h,
                        int64_t grp, const float* state0) {
  const int64_t P = v.P, N = v.N, PN = P * N, nc = v.n_chunks();
  if (state0)
    std::memcpy(w.S, state0, PN * sizeof(float));
  else
    std::fill(w.S, w.S + PN, 0.f);
  for (int64_t c = 0; c < nc; ++c) {
    std::memcpy(w.states + c * PN, w.S, PN * sizeof(float));
    if (c == nc - 1) break;
    const int64_t r0 = v.row0(b, c), q = v.len(c);
    cumsum(v, w, b, h, c);
    const float* dt = v.dt + r0 * v.ldt + h;
    const float* X = v.x + r0 * v.ldx + h * P;
    const float end = static_cast<float>(w.cs[q - 1]);
    for (int64_t s = 0; s < q; ++s) {
      const float wt = std::exp(end - static_cast<float>(w.cs[s])) * dt[s * v.ldt];
      for (int64_t p = 0; p < P; ++p) w.Xw[s * P + p] = X[s * v.ldx + p] * wt;
    }
    gemm(true, false, P, N, q, 1.f, w.Xw, P, v.B + grp * N + r0 * v.ldb, v.ldb, std::exp(end), w.S,
         N);
  }
}

// Reverse sweep through chunk c, with w.dS the gradient of the state leaving
// it (on return: entering it).
void backward_chunk(const SsdBackwardView& v, SsdBackwardScratch& w, int64_t b, int64_t h,
                    int64_t grp, int64_t c, double& dA_acc, double& dD_acc) {
  const int64_t P = v.P, N = v.N, Q = v.Q, r0 = v.row0(b, c), q = v.len(c);
  const float A = v.A[h], Dh = v.D ? v.D[h] : 0.f;
  cumsum(v, w, b, h, c);
  const double* cs = w.cs;
  double* dcs = w.dcs;
  double* ddt = w.ddt;
  const float* dt = v.dt + r0 * v.ldt + h;
  const float* X = v.x + r0 * v.ldx + h * P;
  const float* Bc = v.B + grp * N + r0 * v.ldb;
  const float* Cc = v.C + grp * N + r0 * v.ldc;
  const float* dY = v.dy + r0 * v.lddy + h * P;
  float* dX = v.dx + r0 * v.lddx + h * P;
  float* dBc = v.dB + grp * N + r0 * v.lddb;
  float* dCc = v.dC + grp * N + r0 * v.lddc;
  const float* Sprev = w.states + c * P * N;
  const float* sc = w.scores + c * Q * Q;
  float* dcb = w.dCB + c * Q * Q;
  std::fill(dcs, dcs + q, 0.0);
  std::fill(ddt, ddt + q, 0.0);

  // Skip term y += D x.
  for (int64_t t = 0; t < q; ++t)
    dD_acc += ssd_skip_row(dY + t * v.lddy, X + t * v.ldx, Dh, P, dX + t * v.lddx);

  // Intra-chunk: M_ts = sc_ts exp(cs_t - cs_s) dt_s for s <= t, and the
  // gradient through it (ssd_pair_terms.h).
  float* M = w.M;
  float* dM = w.dM;
  for (int64_t t = 0; t < q; ++t) {
    w.csf[t] = static_cast<float>(cs[t]);  // exact: a float sum
    w.dtc[t] = dt[t * v.ldt];
  }
  // M is zero past the diagonal, and only dM's lower triangle is read (as
  // far as the pair terms' vectors reach): the products skip the rest.
  ssd_decay_scores(sc, Q, w.csf, w.dtc, q, M, q);
  gemm_lower_transposed_add(q, P, M, q, dY, v.lddy, dX, v.lddx);
  gemm_causal_scores(q, P, 1, dY, v.lddy, X, v.ldx, dM, q);
  ssd_decay_scores_backward(dM, M, q, sc, Q, cs, w.dtc, q, dcs, ddt, dcb, Q);

  // Carried state: y_t += exp(cs_t) S_prev C_t.
  gemm(false, false, q, N, P, 1.f, dY, v.lddy, Sprev, N, 0.f, w.G1, N);
  row_dots(w.G1, N, Cc, v.ldc, q, N, w.dots);
  for (int64_t t = 0; t < q; ++t) {
    const float e = std::exp(static_cast<float>(cs[t]));
    ssd_carried_row(e, w.G1 + t * N, Cc + t * v.ldc, N, dCc + t * v.lddc, w.Cs + t * N);
    dcs[t] += e * w.dots[t];
  }

  // State update, with dS the gradient of the state leaving chunk c.
  const double end = cs[q - 1];
  const float decay = std::exp(static_cast<float>(end));
  gemm(false, false, q, N, P, 1.f, X, v.ldx, w.dS, N, 0.f, w.G2, N);
  gemm(false, true, q, P, N, 1.f, Bc, v.ldb, w.dS, N, 0.f, w.G3, P);
  row_dots(w.G2, N, Bc, v.ldb, q, N, w.dots);
  for (int64_t s = 0; s < q; ++s) {
    const double e = std::exp(end - cs[s]);
    const double wt = e * dt[s * v.ldt];
    const double dw = w.dots[s];
    ssd_add_weighted_row(wt, w.G2 + s * N, N, dBc + s * v.lddb);
    ssd_add_weighted_row(wt, w.G3 + s * P, P, dX + s * v.lddx);
    ddt[s] += dw * e;
    dcs[q - 1] += dw * wt;
    dcs[s] -= dw * wt;
  }
  double sd = 0;
  for (int64_t k = 0; k < P * N; ++k) sd += static_cast<double>(w.dS[k]) * Sprev[k];
  for (int64_t k = 0; k < P * N; ++k) w.dS_new[k] = decay * w.dS[k];
  dcs[q - 1] += decay * sd;
  gemm(true, false, P, N, q, 1.f, dY, v.lddy, w.Cs, N, 1.f, w.dS_new, N);
  std::swap(w.dS, w.dS_new);

  // cs_t = sum_{k<=t} dt_k A.
  double run = 0;
  for (int64_t t = q - 1; t >= 0; --t) {
    run += dcs[t];
    ddt[t] += run * A;
    dA_acc += run * dt[t * v.ldt];
    v.ddt[(r0 + t) * v.lddt + h] = static_cast<float>(ddt[t]);
  }
}

}  // namespace

void ssd_scan_backward(Context& ctx, const ops::SsdScanBackwardArgs& a) {
  const SsdBackwardView v(a);
  const int64_t Bn = a.fwd.x.dim(0), L = v.L, H = v.H, P = v.P, N = v.N, G = v.G, Q = v.Q;
  if (L == 0) return;
  const int64_t nc = v.n_chunks(), heads_per_group = H / G;
  Arena& arena = ctx.arena();
  const Tensor parts = arena.alloc(DType::kF32, {2, Bn * H});  // dA, dD per (batch row, head)
  float* dA_part = ops::elements<float>(parts);
  float* dD_part = dA_part + Bn * H;
  const int64_t slot_floats = SsdBackwardScratch::floats(v),
                slot_doubles = SsdBackwardScratch::kDoublesPerStep * Q;
  const int64_t slots = worker_slots(ctx.pool(), Bn * G);
  const Tensor scratch_f = arena.alloc(DType::kF32, {slots, slot_floats});
  const Tensor scratch_d = arena.alloc(DType::kF64, {slots, slot_doubles});

  parallel_for_slots(ctx.pool(), Bn * G, [&](int64_t slot, int64_t i0, int64_t i1) {
    SsdBackwardScratch w(v, ops::elements<float>(scratch_f) + slot * slot_floats,
                         ops::elements<double>(scratch_d) + slot * slot_doubles);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / G, grp = i % G;
      const float* Bg = v.B + grp * N;
      const float* Cg = v.C + grp * N;
      float* dBg = v.dB + grp * N;
      float* dCg = v.dC + grp * N;
      for (int64_t t = 0; t < L; ++t) {
        std::memset(dBg + (b * L + t) * v.lddb, 0, N * sizeof(float));
        std::memset(dCg + (b * L + t) * v.lddc, 0, N * sizeof(float));
      }
      // The scores C B^T only where the pair terms read them (their lower
      // triangle, as far as a vector reaches past the diagonal).
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t r0 = v.row0(b, c), q = v.len(c);
        gemm_causal_scores(q, N, 1, Cg + r0 * v.ldc, v.ldc, Bg + r0 * v.ldb, v.ldb,
                           w.scores + c * Q * Q, Q);
      }
      std::fill(w.dCB, w.dCB + nc * Q * Q, 0.f);

      for (int64_t h = grp * heads_per_group; h < (grp + 1) * heads_per_group; ++h) {
        double dA_acc = 0, dD_acc = 0;
        const float* state0 = v.state ? v.state + (b * H + h) * P * N : nullptr;
        chunk_start_states(v, w, b, h, grp, state0);
        std::fill(w.dS, w.dS + P * N, 0.f);
        for (int64_t c = nc - 1; c >= 0; --c) backward_chunk(v, w, b, h, grp, c, dA_acc, dD_acc);
        dA_part[b * H + h] = static_cast<float>(dA_acc);
        dD_part[b * H + h] = static_cast<float>(dD_acc);
      }

      // dC_t += sum_{s<=t} dCB_ts B_s, dB_s += sum_{t>=s} dCB_ts C_t (all
      // heads summed; dCB is zero past the diagonal).
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t r0 = v.row0(b, c), q = v.len(c);
        const float* dcb = w.dCB + c * Q * Q;
        gemm_lower_add(q, N, dcb, Q, Bg + r0 * v.ldb, v.ldb, dCg + r0 * v.lddc, v.lddc);
        gemm_lower_transposed_add(q, N, dcb, Q, Cg + r0 * v.ldc, v.ldc, dBg + r0 * v.lddb, v.lddb);
      }
    }
  });
  float* dA = ops::elements<float>(a.dA);
  float* dD = ops::elements_or_null<float>(a.dD);
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t h = 0; h < H; ++h) {
      dA[h] += dA_part[b * H + h];
      if (dD) dD[h] += dD_part[b * H + h];
    }
}

}  // namespace ssm::cpu
