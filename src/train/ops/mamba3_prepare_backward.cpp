// Three passes, each with a single writer per output:
//   per (b, h)  un-rotate dq, dk; the phase gradient, summed backwards over
//               time (phase_t = sum_{s<=t} rate_s dt_s), feeds dt; dt, A
//               and lam back to their raw projections;
//   per row     the angle rates (summed over heads), the B/C norms (summed
//               over the heads of a group and the ranks' own rows), x;
//   per head    the bias, mimo_x and dt_bias sums over all rows.
#include "ssm/train/ops/mamba3_prepare_backward.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/train/ops/activations_backward.h"
#include "ssm/train/ops/rotary_backward.h"

namespace ssm::ops {
namespace {

constexpr float kPi = std::numbers::pi_v<float>;
// Rows per block of the norm-weight partial sums (fixed: thread-count independent).
constexpr int64_t kRowBlock = 32;

// d heavy_tail(v) / dv; heavy_tail(v) = 1 + v (v >= 0), 1 / (1 - v) (v < 0).
double heavy_tail_grad(double v) { return v >= 0 ? 1.0 : 1.0 / ((1.0 - v) * (1.0 - v)); }
double heavy_tail(double v) { return v >= 0 ? 1.0 + v : 1.0 / (1.0 - v); }

// out = RMSNorm(x) * w over n entries: dx from dout; dw += dout x r.
void norm_backward(const float* x, const float* w, const double* dout, int64_t n, float eps,
                   float* dx, double* dw) {
  double ss = 0, dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    ss += static_cast<double>(x[i]) * x[i];
    dot += x[i] * w[i] * dout[i];
  }
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  const double c = dot * r * r * r / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = static_cast<float>(r * w[i] * dout[i] - x[i] * c);
    if (dw) dw[i] += dout[i] * x[i] * r;
  }
}

// Per (b, h): un-rotation, phase, dt / A / lam. G receives, per step, the
// gradient of phase_s summed over t >= s: (B, H, L, S_ang).
void heads_pass(const Mamba3PrepareArgs& a, const Mamba3PrepareGrads& g, float* G,
                ThreadPool& pool) {
  pool.parallel_for(a.batch * a.heads, [&](int64_t i0, int64_t i1) {
    const int64_t L = a.length, H = a.heads, N = a.d_state, R = a.rank, S = a.n_angles;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t;
        const float* phase = a.phases + step * S;
        float* gp = G + step * S;
        for (int64_t j = 0; j < S; ++j) {
          const float c = std::cos(phase[j]), s = std::sin(phase[j]);
          float d = 0.f;
          for (int64_t r = 0; r < R; ++r) {
            const int64_t at = (step * R + r) * N;
            d += rotate_pair_backward(a.q + at, g.dq + at, a.pairs, N / 2, j, c, s);
            d += rotate_pair_backward(a.k + at, g.dk + at, a.pairs, N / 2, j, c, s);
          }
          gp[j] = d;
        }
      }
      for (int64_t t = L - 2; t >= 0; --t)
        for (int64_t j = 0; j < S; ++j) G[(i * L + t) * S + j] += G[(i * L + t + 1) * S + j];
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t, row = b * L + t;
        double ddt = g.ddt[step];
        for (int64_t j = 0; j < S; ++j)
          ddt += static_cast<double>(G[step * S + j]) * (kPi * std::tanh(a.ang[row * a.ld + j]));
        g.dddt[row * g.ld + h] =
            static_cast<float>(ddt * softplus_grad(a.ddt[row * a.ld + h] + a.dt_bias[h]));
        // A = min(-f(ddA), -A_floor): no gradient where the floor wins.
        const float v = a.ddA[row * a.ld + h];
        const bool floored = -heavy_tail(v) >= -static_cast<double>(a.A_floor);
        g.dddA[row * g.ld + h] =
            floored ? 0.f : static_cast<float>(-g.dA[step] * heavy_tail_grad(v));
        const float lam = a.lam[step];
        g.dtrap[row * g.ld + h] = g.dlam[step] * lam * (1.f - lam);
      }
    }
  });
}

// Per row: dang, dB, dC, dx; norm-weight partials per block of rows.
void rows_pass(const Mamba3PrepareArgs& a, const Mamba3PrepareGrads& g, const float* G,
               std::vector<double>& dBw, std::vector<double>& dCw, ThreadPool& pool) {
  const int64_t rows = a.batch * a.length, blocks = (rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(blocks, [&](int64_t k0, int64_t k1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, groups = a.groups;
    const int64_t R = a.rank, S = a.n_angles, hpg = H / groups;
    std::vector<double> dn(N);
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t row = k * kRowBlock; row < std::min(rows, (k + 1) * kRowBlock); ++row) {
        const int64_t b = row / L, t = row % L;
        auto step_of = [&](int64_t h) { return (b * H + h) * L + t; };
        for (int64_t j = 0; j < S; ++j) {
          double d = 0;
          for (int64_t h = 0; h < H; ++h)
            d += static_cast<double>(G[step_of(h) * S + j]) * a.dt[step_of(h)];
          const double th = std::tanh(static_cast<double>(a.ang[row * a.ld + j]));
          g.dang[row * g.ld + j] = static_cast<float>(d * kPi * (1.0 - th * th));
        }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t grp = 0; grp < groups; ++grp) {
            const int64_t col = (r * groups + grp) * N;
            for (int which = 0; which < 2; ++which) {
              const float* dsrc = which == 0 ? g.dk : g.dq;
              std::fill(dn.begin(), dn.end(), 0.0);
              for (int64_t h = grp * hpg; h < (grp + 1) * hpg; ++h)
                for (int64_t n = 0; n < N; ++n) dn[n] += dsrc[(step_of(h) * R + r) * N + n];
              const bool isB = which == 0;
              norm_backward((isB ? a.B : a.C) + row * a.ld + col, isB ? a.B_norm : a.C_norm,
                            dn.data(), N, a.norm_eps, (isB ? g.dB : g.dC) + row * g.ld + col,
                            (isB ? dBw : dCw).data() + k * N);
            }
          }
        for (int64_t h = 0; h < H; ++h)
          for (int64_t p = 0; p < P; ++p) {
            double d = 0;
            for (int64_t r = 0; r < R; ++r)
              d += static_cast<double>(g.dv[(step_of(h) * R + r) * P + p]) *
                   (a.mimo_x ? a.mimo_x[(h * R + r) * P + p] : 1.f);
            g.dx[row * g.ld + h * P + p] = static_cast<float>(d);
          }
      }
  });
}

// Per head: sums over all rows for the biases, mimo_x and dt_bias.
void params_pass(const Mamba3PrepareArgs& a, const Mamba3PrepareGrads& g, ThreadPool& pool) {
  pool.parallel_for(a.heads, [&](int64_t h0, int64_t h1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, R = a.rank;
    std::vector<double> db(R * N), dc(R * N), dm(R * P);
    for (int64_t h = h0; h < h1; ++h) {
      std::fill(db.begin(), db.end(), 0.0);
      std::fill(dc.begin(), dc.end(), 0.0);
      std::fill(dm.begin(), dm.end(), 0.0);
      double dbias = 0;
      for (int64_t b = 0; b < a.batch; ++b)
        for (int64_t t = 0; t < L; ++t) {
          const int64_t step = (b * H + h) * L + t, row = b * L + t;
          for (int64_t k = 0; k < R * N; ++k) {
            db[k] += g.dk[step * R * N + k];
            dc[k] += g.dq[step * R * N + k];
          }
          if (g.dmimo_x)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t p = 0; p < P; ++p)
                dm[r * P + p] +=
                    static_cast<double>(g.dv[(step * R + r) * P + p]) * a.x[row * a.ld + h * P + p];
          dbias += g.dddt[row * g.ld + h];
        }
      for (int64_t k = 0; k < R * N; ++k) {
        if (g.dB_bias) g.dB_bias[h * R * N + k] += static_cast<float>(db[k]);
        if (g.dC_bias) g.dC_bias[h * R * N + k] += static_cast<float>(dc[k]);
      }
      if (g.dmimo_x)
        for (int64_t k = 0; k < R * P; ++k) g.dmimo_x[h * R * P + k] += static_cast<float>(dm[k]);
      if (g.ddt_bias) g.ddt_bias[h] += static_cast<float>(dbias);
    }
  });
}

void add_blocks(const std::vector<double>& partial, int64_t n, float* out) {
  if (!out) return;
  const int64_t blocks = static_cast<int64_t>(partial.size()) / n;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t k = 0; k < blocks; ++k) s += partial[k * n + i];
    out[i] += static_cast<float>(s);
  }
}

}  // namespace

void mamba3_prepare_backward(const Mamba3PrepareArgs& a, const Mamba3PrepareGrads& g,
                             ThreadPool& pool) {
  SSM_CHECK(a.phases && a.q && a.k && a.dt && a.lam,
            "mamba3_prepare_backward needs the forward's phases, q, k, dt and lam");
  SSM_CHECK(a.heads % a.groups == 0, "heads ", a.heads, " not a multiple of groups ", a.groups);
  const int64_t rows = a.batch * a.length, S = a.n_angles, N = a.d_state;
  if (rows == 0) return;
  std::vector<float> G(a.batch * a.heads * a.length * S);
  heads_pass(a, g, G.data(), pool);
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> dBw(blocks * N, 0.0), dCw(blocks * N, 0.0);
  rows_pass(a, g, G.data(), dBw, dCw, pool);
  params_pass(a, g, pool);
  add_blocks(dBw, N, g.dB_norm);
  add_blocks(dCw, N, g.dC_norm);
}

}  // namespace ssm::ops
