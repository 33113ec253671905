// mamba3_prepare_backward on the cpu, in three passes, each with a single
// writer per output:
//   per (b, h)  un-rotate dq, dk; the phase gradient, summed backwards over
//               time (phase_t = sum_{s<=t} rate_s dt_s), feeds dt; dt, A
//               and lam back to their raw projections;
//   per row     the angle rates (summed over heads), the B/C norms (summed
//               over the heads of a group and the ranks' own rows), x;
//   per head    the bias, mimo_x and dt_bias sums over all rows.
// Sums over heads, rows and batch run in a fixed order whatever the threads.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_math.h"
#include "ops/cpu/mamba3_workspace.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {

using namespace m3;

namespace {

constexpr float kPi = std::numbers::pi_v<float>;
// Rows per block of the norm-weight partial sums (fixed: thread-count independent).
constexpr int64_t kRowBlock = 32;

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
    dw[i] += dout[i] * x[i] * r;
  }
}

// Per (b, h): un-rotation, phase, dt / A / lam. G receives, per step, the
// gradient of phase_s summed over t >= s: (B, H, L, S).
void heads_pass(Context& ctx, const ops::Mamba3PrepareBackwardArgs& g, const PrepareDims& d,
                float* G) {
  const ops::Mamba3PrepareArgs& a = g.fwd;
  const auto ang = in_block(a.ang), ddt_in = in_block(a.ddt), ddA = in_block(a.ddA);
  const auto dddt = out_block(g.dddt), dddA = out_block(g.dddA), dtrap = out_block(g.dtrap);
  const float *phases = a.phases.data<float>(), *q = a.q.data<float>(), *k = a.k.data<float>();
  const float *lam_f = a.lam.data<float>(), *dt_bias = a.dt_bias.data<float>();
  const float *ddt = g.ddt.data<float>(), *dA = g.dA.data<float>(), *dlam = g.dlam.data<float>();
  float *dq = out(g.dq), *dk = out(g.dk);
  ctx.pool().parallel_for(d.B * d.H, [&](int64_t i0, int64_t i1) {
    const int64_t L = d.L, H = d.H, N = d.N, R = d.R, S = d.S;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t;
        const float* phase = phases + step * S;
        float* gp = G + step * S;
        for (int64_t j = 0; j < S; ++j) {
          const float c = std::cos(phase[j]), s = std::sin(phase[j]);
          int64_t e0, e1;
          rotary_pair(a.pairs, N, j, e0, e1);
          float dphi = 0.f;
          for (int64_t r = 0; r < R; ++r) {
            const int64_t at = (step * R + r) * N;
            dphi += ops::rotate_pair_backward(q + at, dq + at, e0, e1, c, s);
            dphi += ops::rotate_pair_backward(k + at, dk + at, e0, e1, c, s);
          }
          gp[j] = dphi;
        }
      }
      for (int64_t t = L - 2; t >= 0; --t)
        for (int64_t j = 0; j < S; ++j) G[(i * L + t) * S + j] += G[(i * L + t + 1) * S + j];
      for (int64_t t = 0; t < L; ++t) {
        const int64_t step = i * L + t, row = b * L + t;
        double grad_dt = ddt[step];
        for (int64_t j = 0; j < S; ++j)
          grad_dt += static_cast<double>(G[step * S + j]) * (kPi * std::tanh(ang(row, j)));
        dddt(row, h) =
            static_cast<float>(grad_dt * ops::softplus_grad(ddt_in(row, h) + dt_bias[h]));
        // A = min(-f(ddA), -A_floor): no gradient where the floor wins.
        const float v = ddA(row, h);
        const bool floored = -heavy_tail<double>(v) >= -static_cast<double>(a.A_floor);
        dddA(row, h) = floored ? 0.f : static_cast<float>(-dA[step] * heavy_tail_grad(v));
        const float lam = lam_f[step];
        dtrap(row, h) = dlam[step] * lam * (1.f - lam);
      }
    }
  });
}

// Per row: dang, dB, dC, dx; norm-weight partials per block of rows.
void rows_pass(Context& ctx, const ops::Mamba3PrepareBackwardArgs& g, const PrepareDims& d,
               const float* G, double* dBw, double* dCw) {
  const ops::Mamba3PrepareArgs& a = g.fwd;
  const int64_t rows = d.B * d.L, blocks = (rows + kRowBlock - 1) / kRowBlock;
  const auto ang = in_block(a.ang), Bm = in_block(a.B), Cm = in_block(a.C);
  const auto dang = out_block(g.dang), dB = out_block(g.dB), dC = out_block(g.dC);
  const auto dx = out_block(g.dx);
  const float *dt = a.dt.data<float>(), *mimo_x = in_or_null(a.mimo_x);
  const float *dq = g.dq.data<float>(), *dk = g.dk.data<float>(), *dv = g.dv.data<float>();
  const Parts parts = split(ctx, blocks);
  double* dn_slots = ctx.arena().alloc(DType::kF64, {parts.count, d.N}).data<double>();
  for_each_part(ctx, parts, [&](int64_t part, int64_t k0, int64_t k1) {
    const int64_t L = d.L, H = d.H, P = d.P, N = d.N, groups = d.G;
    const int64_t R = d.R, S = d.S, hpg = H / groups;
    double* dn = dn_slots + part * N;
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t row = k * kRowBlock; row < std::min(rows, (k + 1) * kRowBlock); ++row) {
        const int64_t b = row / L, t = row % L;
        auto step_of = [&](int64_t h) { return (b * H + h) * L + t; };
        for (int64_t j = 0; j < S; ++j) {
          double sum = 0;
          for (int64_t h = 0; h < H; ++h)
            sum += static_cast<double>(G[step_of(h) * S + j]) * dt[step_of(h)];
          const double th = std::tanh(static_cast<double>(ang(row, j)));
          dang(row, j) = static_cast<float>(sum * kPi * (1.0 - th * th));
        }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t grp = 0; grp < groups; ++grp) {
            const int64_t col = (r * groups + grp) * N;
            for (const bool isB : {true, false}) {
              const float* dsrc = isB ? dk : dq;
              std::fill(dn, dn + N, 0.0);
              for (int64_t h = grp * hpg; h < (grp + 1) * hpg; ++h)
                for (int64_t n = 0; n < N; ++n) dn[n] += dsrc[(step_of(h) * R + r) * N + n];
              norm_backward(&(isB ? Bm : Cm)(row, col), (isB ? a.B_norm : a.C_norm).data<float>(),
                            dn, N, a.norm_eps, &(isB ? dB : dC)(row, col),
                            (isB ? dBw : dCw) + k * N);
            }
          }
        for (int64_t h = 0; h < H; ++h)
          for (int64_t p = 0; p < P; ++p) {
            double sum = 0;
            for (int64_t r = 0; r < R; ++r)
              sum += static_cast<double>(dv[(step_of(h) * R + r) * P + p]) *
                     (mimo_x ? mimo_x[(h * R + r) * P + p] : 1.f);
            dx(row, h * P + p) = static_cast<float>(sum);
          }
      }
  });
}

struct ParamSums {
  int64_t R, N, P;
  double *db, *dc, *dm;
  void carve(Carver<float>&, Carver<double>& d) {
    db = d.take(R * N);
    dc = d.take(R * N);
    dm = d.take(R * P);
  }
};

// Per head: sums over all rows for the biases, mimo_x and dt_bias.
void params_pass(Context& ctx, const ops::Mamba3PrepareBackwardArgs& g, const PrepareDims& d) {
  const ops::Mamba3PrepareArgs& a = g.fwd;
  const auto x = in_block(a.x), dddt = in_block(g.dddt);
  const float *dq = g.dq.data<float>(), *dk = g.dk.data<float>(), *dv = g.dv.data<float>();
  float *dB_bias = out_or_null(g.dB_bias), *dC_bias = out_or_null(g.dC_bias);
  float *dmimo_x = out_or_null(g.dmimo_x), *ddt_bias = out_or_null(g.ddt_bias);
  const Parts parts = split(ctx, d.H);
  const Slots<ParamSums> slots(ctx, parts, {.R = d.R, .N = d.N, .P = d.P});
  for_each_part(ctx, parts, [&](int64_t part, int64_t h0, int64_t h1) {
    const int64_t L = d.L, H = d.H, P = d.P, N = d.N, R = d.R;
    const ParamSums ws = slots[part];
    for (int64_t h = h0; h < h1; ++h) {
      std::fill(ws.db, ws.db + R * N, 0.0);
      std::fill(ws.dc, ws.dc + R * N, 0.0);
      std::fill(ws.dm, ws.dm + R * P, 0.0);
      double dbias = 0;
      for (int64_t b = 0; b < d.B; ++b)
        for (int64_t t = 0; t < L; ++t) {
          const int64_t step = (b * H + h) * L + t, row = b * L + t;
          for (int64_t k = 0; k < R * N; ++k) {
            ws.db[k] += dk[step * R * N + k];
            ws.dc[k] += dq[step * R * N + k];
          }
          if (dmimo_x)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t p = 0; p < P; ++p)
                ws.dm[r * P + p] +=
                    static_cast<double>(dv[(step * R + r) * P + p]) * x(row, h * P + p);
          dbias += dddt(row, h);
        }
      for (int64_t k = 0; k < R * N; ++k) {
        if (dB_bias) dB_bias[h * R * N + k] += static_cast<float>(ws.db[k]);
        if (dC_bias) dC_bias[h * R * N + k] += static_cast<float>(ws.dc[k]);
      }
      if (dmimo_x)
        for (int64_t k = 0; k < R * P; ++k) dmimo_x[h * R * P + k] += static_cast<float>(ws.dm[k]);
      if (ddt_bias) ddt_bias[h] += static_cast<float>(dbias);
    }
  });
}

void add_blocks(const double* partial, int64_t blocks, int64_t n, const Tensor& grad) {
  if (!grad.defined()) return;
  float* o = out(grad);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t k = 0; k < blocks; ++k) s += partial[k * n + i];
    o[i] += static_cast<float>(s);
  }
}

}  // namespace

void mamba3_prepare_backward(Context& ctx, const ops::Mamba3PrepareBackwardArgs& g) {
  const PrepareDims d(g.fwd);
  const int64_t rows = d.B * d.L;
  if (rows == 0) return;
  float* G = ctx.arena().alloc(DType::kF32, {d.B, d.H, d.L, d.S}).data<float>();
  heads_pass(ctx, g, d, G);
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  double* dBw = ctx.arena().zeros(DType::kF64, {blocks, d.N}).data<double>();
  double* dCw = ctx.arena().zeros(DType::kF64, {blocks, d.N}).data<double>();
  rows_pass(ctx, g, d, G, dBw, dCw);
  params_pass(ctx, g, d);
  add_blocks(dBw, blocks, d.N, g.dB_norm);
  add_blocks(dCw, blocks, d.N, g.dC_norm);
}

}  // namespace ssm::cpu
