// mamba3_prepare on the cpu: the elementwise parts of the mixer around the
// scan (SPEC §4). Parallel over rows for the parts the heads share, then over
// (b, h), each walking its phase through time. Allocates nothing: it runs on
// every decode step.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_math.h"
#include "ops/cpu/mamba3_workspace.h"
#include "ops/cpu/rotary.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {

using namespace m3;

namespace {

// out = RMSNorm(in) * w over n entries.
inline void normalize(const float* in, const float* w, int64_t n, float eps, float* out) {
  const float s = static_cast<float>(inv_rms(in, n, eps));
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s * w[i];
}

// Per row: B and C normed for every (rank, group), and the angle rates.
void prepare_rows(Context& ctx, const ops::Mamba3PrepareArgs& a, const PrepareDims& d) {
  const auto Bm = in_block(a.B), Cm = in_block(a.C), ang = in_block(a.ang);
  float *B_normed = out(a.B_normed), *C_normed = out(a.C_normed), *ang_rate = out(a.ang_rate);
  ctx.pool().parallel_for(d.B * d.L, [&](int64_t row0, int64_t row1) {
    const int64_t N = d.N, RG = d.R * d.G, S = d.S;
    constexpr float kPi = std::numbers::pi_v<float>;
    for (int64_t row = row0; row < row1; ++row) {
      for (int64_t i = 0; i < RG; ++i) {
        normalize(&Bm(row, i * N), a.B_norm.data<float>(), N, a.norm_eps,
                  B_normed + (row * RG + i) * N);
        normalize(&Cm(row, i * N), a.C_norm.data<float>(), N, a.norm_eps,
                  C_normed + (row * RG + i) * N);
      }
      for (int64_t j = 0; j < S; ++j) ang_rate[row * S + j] = kPi * std::tanh(ang(row, j));
    }
  });
}

// Per (b, h): the step scalars, the phase walk, q, k and v.
void prepare_heads(Context& ctx, const ops::Mamba3PrepareArgs& a, const PrepareDims& d) {
  const auto x = in_block(a.x), ddt = in_block(a.ddt), ddA = in_block(a.ddA);
  const auto trap = in_block(a.trap);
  const float *dt_bias = a.dt_bias.data<float>(), *mimo_x = in_or_null(a.mimo_x);
  const float *B_bias = a.B_bias.data<float>(), *C_bias = a.C_bias.data<float>();
  const float *B_normed = a.B_normed.data<float>(), *C_normed = a.C_normed.data<float>();
  const float* ang_rate = a.ang_rate.data<float>();
  float *phase_io = out(a.phase), *phases = out_or_null(a.phases);
  float *dt_out = out(a.dt), *A_out = out(a.A), *lam_out = out(a.lam);
  float *q_out = out(a.q), *k_out = out(a.k), *v_out = out(a.v);
  ctx.pool().parallel_for(d.B * d.H, [&](int64_t i0, int64_t i1) {
    const int64_t L = d.L, H = d.H, P = d.P, N = d.N, G = d.G, R = d.R, S = d.S;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, g = h / (H / G);
      float* phase = phase_io + i * S;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t, step = i * L + t;
        const float dt = ops::softplus(ddt(row, h) + dt_bias[h]);
        dt_out[step] = dt;
        A_out[step] = std::min(-heavy_tail(ddA(row, h)), -a.A_floor);
        lam_out[step] = ops::sigmoid(trap(row, h));
        const float* rate = ang_rate + row * S;
        for (int64_t j = 0; j < S; ++j) phase[j] += rate[j] * dt;
        if (phases) std::copy(phase, phase + S, phases + step * S);

        float* q = q_out + step * R * N;
        float* k = k_out + step * R * N;
        float* v = v_out + step * R * P;
        const float* xh = &x(row, h * P);
        // q, k: normed C, B of group g (rank r at stride G N) plus the
        // head's biases, turned by the phase.
        const int64_t at = (row * R * G + g) * N;
        biased_turn({C_normed + at, G * N, C_bias + h * R * N, q},
                    {B_normed + at, G * N, B_bias + h * R * N, k}, R, N, phase, S,
                    a.pairs == ops::RotaryPairs::kAdjacent);
        for (int64_t r = 0; r < R; ++r) {
          const float* mx = mimo_x ? mimo_x + (h * R + r) * P : nullptr;
          for (int64_t p = 0; p < P; ++p) v[r * P + p] = mx ? xh[p] * mx[p] : xh[p];
        }
      }
    }
  });
}

}  // namespace

void mamba3_prepare(Context& ctx, const ops::Mamba3PrepareArgs& a) {
  const PrepareDims d(a);
  prepare_rows(ctx, a, d);
  prepare_heads(ctx, a, d);
}

}  // namespace ssm::cpu
