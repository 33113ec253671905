// Chunked SSD backward. Work is split by (batch row, group): the heads of a
// group run one after another so that the gradient of the shared scores
// C B^T, and hence dB and dC, have a single writer. Per head: a forward
// sweep keeps the state at each chunk start, then a reverse sweep carries
// dS (the gradient of the state leaving the chunk) back through
//   intra   y_t += sum_{s<=t} (C_t.B_s) exp(cs_t - cs_s) dt_s x_s
//   carried y_t += exp(cs_t) S_prev C_t
//   update  S   = exp(cs_end) S_prev + sum_s exp(cs_end - cs_s) dt_s x_s B_s^T
// and finally through cs = cumsum(dt A). Exponents stay <= 0 as in the forward.
#include "ssm/train/ops/ssd_scan_backward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ssm/ops/gemm.h"

namespace ssm::ops {

void ssd_scan_backward(const SsdScanArgs& a, const float* dy, int64_t ld_dy, const SsdScanGrads& g,
                       ThreadPool& pool) {
  const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, G = a.groups;
  if (L == 0) return;
  const int64_t Q = std::max<int64_t>(1, std::min(a.chunk, L));
  const int64_t nc = (L + Q - 1) / Q, heads_per_group = H / G;
  std::vector<float> dA_part(a.batch * H, 0.f), dD_part(a.batch * H, 0.f);

  pool.parallel_for(a.batch * G, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(nc * Q * Q), dCB(nc * Q * Q), states(nc * P * N);
    std::vector<float> S(P * N), dS(P * N), dS_new(P * N);
    std::vector<float> M(Q * Q), dM(Q * Q), G1(Q * N), G2(Q * N), G3(Q * P), Cs(Q * N), Xw(Q * P);
    std::vector<double> cs(Q), dcs(Q), ddt(Q);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / G, grp = i % G;
      auto rows_of = [&](int64_t c) { return b * L + c * Q; };
      auto len_of = [&](int64_t c) { return std::min(Q, L - c * Q); };
      const float* Bg = a.B + grp * N;
      const float* Cg = a.C + grp * N;
      float* dBg = g.dB + grp * N;
      float* dCg = g.dC + grp * N;
      for (int64_t t = 0; t < L; ++t) {
        std::memset(dBg + (b * L + t) * g.ld_dbc, 0, N * sizeof(float));
        std::memset(dCg + (b * L + t) * g.ld_dbc, 0, N * sizeof(float));
      }
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t r0 = rows_of(c), q = len_of(c);
        gemm(false, true, q, q, N, 1.f, Cg + r0 * a.ld_bc, a.ld_bc, Bg + r0 * a.ld_bc, a.ld_bc, 0.f,
             scores.data() + c * Q * Q, Q);
      }
      std::fill(dCB.begin(), dCB.end(), 0.f);

      for (int64_t h = grp * heads_per_group; h < (grp + 1) * heads_per_group; ++h) {
        const float A = a.A[h];
        const float Dh = a.D ? a.D[h] : 0.f;
        double dA_acc = 0, dD_acc = 0;
        // cs of chunk c into cs[0..q).
        auto cumsum = [&](int64_t c) {
          const float* dt = a.dt + rows_of(c) * a.ld_dt + h;
          float run = 0.f;
          for (int64_t t = 0; t < len_of(c); ++t) cs[t] = run += dt[t * a.ld_dt] * A;
        };

        // Forward sweep: the state entering each chunk.
        if (a.state) std::memcpy(S.data(), a.state + (b * H + h) * P * N, P * N * sizeof(float));
        else std::fill(S.begin(), S.end(), 0.f);
        for (int64_t c = 0; c < nc; ++c) {
          std::memcpy(states.data() + c * P * N, S.data(), P * N * sizeof(float));
          if (c == nc - 1) break;
          const int64_t r0 = rows_of(c), q = len_of(c);
          cumsum(c);
          const float* dt = a.dt + r0 * a.ld_dt + h;
          const float* X = a.x + r0 * a.ld_x + h * P;
          const float end = static_cast<float>(cs[q - 1]);
          for (int64_t s = 0; s < q; ++s) {
            const float w = std::exp(end - static_cast<float>(cs[s])) * dt[s * a.ld_dt];
            for (int64_t p = 0; p < P; ++p) Xw[s * P + p] = X[s * a.ld_x + p] * w;
          }
          gemm(true, false, P, N, q, 1.f, Xw.data(), P, Bg + r0 * a.ld_bc, a.ld_bc, std::exp(end),
               S.data(), N);
        }

        std::fill(dS.begin(), dS.end(), 0.f);
        for (int64_t c = nc - 1; c >= 0; --c) {
          const int64_t r0 = rows_of(c), q = len_of(c);
          cumsum(c);
          const float* dt = a.dt + r0 * a.ld_dt + h;
          const float* X = a.x + r0 * a.ld_x + h * P;
          const float* Bc = Bg + r0 * a.ld_bc;
          const float* Cc = Cg + r0 * a.ld_bc;
          const float* dY = dy + r0 * ld_dy + h * P;
          float* dX = g.dx + r0 * g.ld_dx + h * P;
          float* dBc = dBg + r0 * g.ld_dbc;
          float* dCc = dCg + r0 * g.ld_dbc;
          const float* Sprev = states.data() + c * P * N;
          const float* sc = scores.data() + c * Q * Q;
          float* dcb = dCB.data() + c * Q * Q;
          std::fill(dcs.begin(), dcs.begin() + q, 0.0);
          std::fill(ddt.begin(), ddt.begin() + q, 0.0);

          // Skip term y += D x.
          for (int64_t t = 0; t < q; ++t)
            for (int64_t p = 0; p < P; ++p) {
              dD_acc += static_cast<double>(dY[t * ld_dy + p]) * X[t * a.ld_x + p];
              dX[t * g.ld_dx + p] = Dh * dY[t * ld_dy + p];
            }

          // Intra-chunk: M_ts = sc_ts exp(cs_t - cs_s) dt_s for s <= t.
          for (int64_t t = 0; t < q; ++t) {
            for (int64_t s = 0; s <= t; ++s)
              M[t * q + s] = sc[t * Q + s] * std::exp(static_cast<float>(cs[t] - cs[s])) * dt[s * a.ld_dt];
            for (int64_t s = t + 1; s < q; ++s) M[t * q + s] = 0.f;
          }
          gemm(true, false, q, P, q, 1.f, M.data(), q, dY, ld_dy, 1.f, dX, g.ld_dx);
          gemm(false, true, q, q, P, 1.f, dY, ld_dy, X, a.ld_x, 0.f, dM.data(), q);
          for (int64_t t = 0; t < q; ++t)
            for (int64_t s = 0; s <= t; ++s) {
              const double dm = dM[t * q + s];
              const double e = std::exp(cs[t] - cs[s]);
              const double v = dm * M[t * q + s];
              dcs[t] += v;
              dcs[s] -= v;
              ddt[s] += dm * sc[t * Q + s] * e;
              dcb[t * Q + s] += static_cast<float>(dm * e * dt[s * a.ld_dt]);
            }

          // Carried state: y_t += exp(cs_t) S_prev C_t.
          gemm(false, false, q, N, P, 1.f, dY, ld_dy, Sprev, N, 0.f, G1.data(), N);
          for (int64_t t = 0; t < q; ++t) {
            const float e = std::exp(static_cast<float>(cs[t]));
            double dot = 0;
            for (int64_t n = 0; n < N; ++n) {
              dCc[t * g.ld_dbc + n] += e * G1[t * N + n];
              dot += static_cast<double>(G1[t * N + n]) * Cc[t * a.ld_bc + n];
              Cs[t * N + n] = e * Cc[t * a.ld_bc + n];
            }
            dcs[t] += e * dot;
          }

          // State update, with dS the gradient of the state leaving chunk c.
          const double end = cs[q - 1];
          const float decay = std::exp(static_cast<float>(end));
          gemm(false, false, q, N, P, 1.f, X, a.ld_x, dS.data(), N, 0.f, G2.data(), N);
          gemm(false, true, q, P, N, 1.f, Bc, a.ld_bc, dS.data(), N, 0.f, G3.data(), P);
          for (int64_t s = 0; s < q; ++s) {
            const double e = std::exp(end - cs[s]);
            const double w = e * dt[s * a.ld_dt];
            double dw = 0;
            for (int64_t n = 0; n < N; ++n) {
              dBc[s * g.ld_dbc + n] += static_cast<float>(w * G2[s * N + n]);
              dw += static_cast<double>(G2[s * N + n]) * Bc[s * a.ld_bc + n];
            }
            for (int64_t p = 0; p < P; ++p) dX[s * g.ld_dx + p] += static_cast<float>(w * G3[s * P + p]);
            ddt[s] += dw * e;
            dcs[q - 1] += dw * w;
            dcs[s] -= dw * w;
          }
          double sd = 0;
          for (int64_t k = 0; k < P * N; ++k) {
            sd += static_cast<double>(dS[k]) * Sprev[k];
            dS_new[k] = decay * dS[k];
          }
          dcs[q - 1] += decay * sd;
          gemm(true, false, P, N, q, 1.f, dY, ld_dy, Cs.data(), N, 1.f, dS_new.data(), N);
          std::swap(dS, dS_new);

          // cs_t = sum_{k<=t} dt_k A.
          double run = 0;
          for (int64_t t = q - 1; t >= 0; --t) {
            run += dcs[t];
            ddt[t] += run * A;
            dA_acc += run * dt[t * a.ld_dt];
            g.ddt[(r0 + t) * g.ld_ddt + h] = static_cast<float>(ddt[t]);
          }
        }
        dA_part[b * H + h] = static_cast<float>(dA_acc);
        dD_part[b * H + h] = static_cast<float>(dD_acc);
      }

      // dC_t += sum_s dCB_ts B_s, dB_s += sum_t dCB_ts C_t (all heads summed).
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t r0 = rows_of(c), q = len_of(c);
        const float* dcb = dCB.data() + c * Q * Q;
        gemm(false, false, q, N, q, 1.f, dcb, Q, Bg + r0 * a.ld_bc, a.ld_bc, 1.f,
             dCg + r0 * g.ld_dbc, g.ld_dbc);
        gemm(true, false, q, N, q, 1.f, dcb, Q, Cg + r0 * a.ld_bc, a.ld_bc, 1.f,
             dBg + r0 * g.ld_dbc, g.ld_dbc);
      }
    }
  });
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      if (g.dA) g.dA[h] += dA_part[b * H + h];
      if (g.dD) g.dD[h] += dD_part[b * H + h];
    }
}

}  // namespace ssm::ops
