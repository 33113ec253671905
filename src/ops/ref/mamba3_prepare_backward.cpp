// mamba3_prepare_backward, the reference: the chain rule through SPEC §4's
// preparation, one stage at a time, in double. The rotation's angle
// gradient runs back through the phase's running sum over time into dt and
// the angle rates; everything else is elementwise or a per-row RMSNorm.
#include <numbers>
#include <vector>

#include "ops/ref/mamba3_ref.h"
#include "ops/scalar_math.h"

namespace ssm::ref {

using namespace m3;

namespace {

// out = x r w, r = 1 / rms(x): dx = r w dout - x r^3 sum(x w dout) / n; dw += dout x r.
template <typename T>
void rms_norm_backward(const T* x, const T* w, const double* dout, int64_t n, double eps, T* dx,
                       double* dw) {
  const double r = inv_rms(x, n, eps);
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(x[i]) * w[i] * dout[i];
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = static_cast<T>(r * w[i] * dout[i] - x[i] * dot * r * r * r / static_cast<double>(n));
    dw[i] += dout[i] * x[i] * r;
  }
}

}  // namespace

template <typename T>
void mamba3_prepare_backward(const ops::Mamba3PrepareBackwardArgs& g) {
  const ops::Mamba3PrepareArgs& a = g.fwd;
  const PrepareDims d(a);
  const int64_t L = d.L, H = d.H, P = d.P, N = d.N, G = d.G, R = d.R, S = d.S;
  const RowsIn<T> x(a.x), ddt_in(a.ddt), ddA(a.ddA), trap(a.trap), ang(a.ang);
  const T *dt_bias = a.dt_bias.data<T>(), *phases = a.phases.data<T>();
  const T *q = a.q.data<T>(), *k = a.k.data<T>(), *mimo_x = in_or_null<T>(a.mimo_x);
  T *dq = out<T>(g.dq), *dk = out<T>(g.dk);
  const T *dv = g.dv.data<T>(), *ddt = g.ddt.data<T>(), *dA = g.dA.data<T>();
  const T* dlam = g.dlam.data<T>();
  const RowsOut<T> dx(g.dx), dddt(g.dddt), dddA(g.dddA), dtrap(g.dtrap), dang(g.dang);
  auto step_of = [&](int64_t b, int64_t h, int64_t t) { return (b * H + h) * L + t; };

  // Undo the rotation of dq and dk in place; the angle's gradient per step,
  // then summed over t >= s: phase_t = phase_{-1} + sum_{s<=t} rate_s dt_s.
  std::vector<double> dphase(d.B * H * L * S, 0.0);
  for (int64_t step = 0; step < d.B * H * L; ++step)
    for (int64_t j = 0; j < S; ++j) {
      int64_t i0, i1;
      rotary_pair(a.pairs, N, j, i0, i1);
      const double c = std::cos(static_cast<double>(phases[step * S + j]));
      const double s = std::sin(static_cast<double>(phases[step * S + j]));
      for (int64_t r = 0; r < R; ++r)
        for (auto [y, dy] : {std::pair{q, dq}, std::pair{k, dk}}) {
          const int64_t at = (step * R + r) * N;
          const double yp[2] = {y[at + i0], y[at + i1]};
          double dyp[2] = {dy[at + i0], dy[at + i1]};
          dphase[step * S + j] += ops::rotate_pair_backward(yp, dyp, 0, 1, c, s);
          dy[at + i0] = static_cast<T>(dyp[0]);
          dy[at + i1] = static_cast<T>(dyp[1]);
        }
    }
  for (int64_t bh = 0; bh < d.B * H; ++bh)
    for (int64_t t = L - 2; t >= 0; --t)
      for (int64_t j = 0; j < S; ++j)
        dphase[(bh * L + t) * S + j] += dphase[(bh * L + t + 1) * S + j];

  // dt (through its own gradient and the phase), A with its floor, lam.
  std::vector<double> drate(d.B * L * S, 0.0), ddt_bias(H, 0.0);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t, step = step_of(b, h, t);
        const double pre = ddt_in(row, h) + static_cast<double>(dt_bias[h]);
        const double dt = ops::softplus(pre);
        double grad_dt = ddt[step];
        for (int64_t j = 0; j < S; ++j) {
          grad_dt += dphase[step * S + j] * std::numbers::pi * std::tanh(ang(row, j));
          drate[row * S + j] += dphase[step * S + j] * dt;
        }
        const double dpre = grad_dt * ops::softplus_grad(pre);
        dddt(row, h) = static_cast<T>(dpre);
        ddt_bias[h] += dpre;
        // A = min(-f(ddA), -A_floor): no gradient where the floor wins.
        const double v = ddA(row, h);
        const bool floored = -heavy_tail(v) >= -double{a.A_floor};
        dddA(row, h) = static_cast<T>(floored ? 0.0 : -dA[step] * heavy_tail_grad(v));
        const double lam = ops::sigmoid(trap(row, h));
        dtrap(row, h) = static_cast<T>(dlam[step] * lam * (1 - lam));
      }
  for (int64_t row = 0; row < d.B * L; ++row)
    for (int64_t j = 0; j < S; ++j) {
      const double th = std::tanh(ang(row, j));
      dang(row, j) = static_cast<T>(drate[row * S + j] * std::numbers::pi * (1 - th * th));
    }
  accumulate<T>(g.ddt_bias, ddt_bias);

  // B and C: each (row, rank, group) is normed once and read by the heads of
  // its group, so their gradients of k (and q) before rotation add up.
  std::vector<double> dB_norm(N, 0.0), dC_norm(N, 0.0), dn(N);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t grp = 0; grp < G; ++grp) {
          const int64_t row = b * L + t, col = (r * G + grp) * N;
          for (const bool isB : {true, false}) {
            std::fill(dn.begin(), dn.end(), 0.0);
            for (int64_t h = grp * (H / G); h < (grp + 1) * (H / G); ++h)
              for (int64_t n = 0; n < N; ++n)
                dn[n] += (isB ? dk : dq)[(step_of(b, h, t) * R + r) * N + n];
            const Tensor& src = isB ? a.B : a.C;
            const Tensor& dsrc = isB ? g.dB : g.dC;
            rms_norm_backward(src.data<T>() + row * src.row_stride() + col,
                              (isB ? a.B_norm : a.C_norm).data<T>(), dn.data(), N, a.norm_eps,
                              out<T>(dsrc) + row * dsrc.row_stride() + col,
                              (isB ? dB_norm : dC_norm).data());
          }
        }
  accumulate<T>(g.dB_norm, dB_norm);
  accumulate<T>(g.dC_norm, dC_norm);

  // The biases (k = normed B + B_bias), and v = x mimo_x.
  std::vector<double> dB_bias(H * R * N, 0.0), dC_bias(H * R * N, 0.0), dmimo_x(H * R * P, 0.0);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t, step = step_of(b, h, t);
        for (int64_t i = 0; i < R * N; ++i) {
          dB_bias[h * R * N + i] += dk[step * R * N + i];
          dC_bias[h * R * N + i] += dq[step * R * N + i];
        }
        for (int64_t p = 0; p < P; ++p) {
          double sum = 0;
          for (int64_t r = 0; r < R; ++r) {
            const double grad_v = dv[(step * R + r) * P + p];
            const int64_t m = (h * R + r) * P + p;
            sum += grad_v * (mimo_x ? static_cast<double>(mimo_x[m]) : 1.0);
            dmimo_x[m] += grad_v * x(row, h * P + p);
          }
          dx(row, h * P + p) = static_cast<T>(sum);
        }
      }
  accumulate<T>(g.dB_bias, dB_bias);
  accumulate<T>(g.dC_bias, dC_bias);
  accumulate<T>(g.dmimo_x, dmimo_x);
}

template void mamba3_prepare_backward<float>(const ops::Mamba3PrepareBackwardArgs&);
template void mamba3_prepare_backward<double>(const ops::Mamba3PrepareBackwardArgs&);

}  // namespace ssm::ref
