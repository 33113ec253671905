// mamba3_prepare, the reference: SPEC §4 from the in_proj segments to the
// scan's inputs, one (batch row, head, step) at a time, in double.
#include <numbers>
#include <vector>

#include "ops/ref/mamba3_ref.h"
#include "ops/scalar_math.h"

namespace ssm::ref {

using namespace m3;

template <typename T>
void mamba3_prepare(const ops::Mamba3PrepareArgs& a) {
  const PrepareDims d(a);
  const int64_t L = d.L, H = d.H, P = d.P, N = d.N, G = d.G, R = d.R, S = d.S;
  const int64_t RGN = R * G * N;
  const RowsIn<T> x(a.x), Bm(a.B), Cm(a.C), ddt(a.ddt), ddA(a.ddA), trap(a.trap), ang(a.ang);
  const T *dt_bias = a.dt_bias.data<T>(), *B_norm = a.B_norm.data<T>();
  const T *C_norm = a.C_norm.data<T>(), *B_bias = a.B_bias.data<T>();
  const T *C_bias = a.C_bias.data<T>(), *mimo_x = in_or_null<T>(a.mimo_x);
  T *B_normed = out<T>(a.B_normed), *C_normed = out<T>(a.C_normed);
  T *ang_rate = out<T>(a.ang_rate), *phase_io = out<T>(a.phase);
  T *dt_out = out<T>(a.dt), *A_out = out<T>(a.A), *lam_out = out<T>(a.lam);
  T *q_out = out<T>(a.q), *k_out = out<T>(a.k), *v_out = out<T>(a.v);
  T* phases = out_or_null<T>(a.phases);

  // Per row, shared by the heads: RMSNorm_N(B_r,g) * B_norm (and C), pi tanh(ang).
  std::vector<double> Bn(RGN), Cn(RGN), phase(S), q(N), k(N);
  auto normed_row = [&](const RowsIn<T>& src, const T* w, int64_t row, double* dst) {
    for (int64_t i = 0; i < R * G; ++i) {
      double ss = 0;
      for (int64_t n = 0; n < N; ++n) ss += src(row, i * N + n) * src(row, i * N + n);
      const double r = 1 / std::sqrt(ss / static_cast<double>(N) + a.norm_eps);
      for (int64_t n = 0; n < N; ++n) dst[i * N + n] = src(row, i * N + n) * r * w[n];
    }
  };
  for (int64_t row = 0; row < d.B * L; ++row) {
    normed_row(Bm, B_norm, row, Bn.data());
    normed_row(Cm, C_norm, row, Cn.data());
    for (int64_t i = 0; i < RGN; ++i) {
      B_normed[row * RGN + i] = static_cast<T>(Bn[i]);
      C_normed[row * RGN + i] = static_cast<T>(Cn[i]);
    }
    for (int64_t j = 0; j < S; ++j)
      ang_rate[row * S + j] = static_cast<T>(std::numbers::pi * std::tanh(ang(row, j)));
  }

  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h, g = h / (H / G);
      for (int64_t j = 0; j < S; ++j) phase[j] = phase_io[bh * S + j];
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t, step = bh * L + t;
        const double dt = ops::softplus(ddt(row, h) + static_cast<double>(dt_bias[h]));
        dt_out[step] = static_cast<T>(dt);
        A_out[step] = static_cast<T>(std::min(-heavy_tail(ddA(row, h)), -double{a.A_floor}));
        lam_out[step] = static_cast<T>(ops::sigmoid(trap(row, h)));
        for (int64_t j = 0; j < S; ++j) {
          phase[j] += std::numbers::pi * std::tanh(ang(row, j)) * dt;
          if (phases) phases[step * S + j] = static_cast<T>(phase[j]);
        }
        normed_row(Bm, B_norm, row, Bn.data());
        normed_row(Cm, C_norm, row, Cn.data());
        for (int64_t r = 0; r < R; ++r) {
          const int64_t src = (r * G + g) * N, bias = (h * R + r) * N;
          for (int64_t n = 0; n < N; ++n) {
            q[n] = Cn[src + n] + C_bias[bias + n];
            k[n] = Bn[src + n] + B_bias[bias + n];
          }
          for (int64_t j = 0; j < S; ++j) {
            int64_t i0, i1;
            rotary_pair(a.pairs, N, j, i0, i1);
            const double c = std::cos(phase[j]), s = std::sin(phase[j]);
            ops::rotate_pair(q.data(), i0, i1, c, s);
            ops::rotate_pair(k.data(), i0, i1, c, s);
          }
          const int64_t at = (step * R + r) * N;
          for (int64_t n = 0; n < N; ++n) {
            q_out[at + n] = static_cast<T>(q[n]);
            k_out[at + n] = static_cast<T>(k[n]);
          }
          for (int64_t p = 0; p < P; ++p) {
            const double m = mimo_x ? static_cast<double>(mimo_x[(h * R + r) * P + p]) : 1.0;
            v_out[(step * R + r) * P + p] = static_cast<T>(x(row, h * P + p) * m);
          }
        }
      }
      for (int64_t j = 0; j < S; ++j) phase_io[bh * S + j] = static_cast<T>(phase[j]);
    }
}

template void mamba3_prepare<float>(const ops::Mamba3PrepareArgs&);
template void mamba3_prepare<double>(const ops::Mamba3PrepareArgs&);

}  // namespace ssm::ref
