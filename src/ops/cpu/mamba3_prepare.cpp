// mamba3_prepare on the cpu: the elementwise parts of the mixer around the
// scan (SPEC §4). Parallel over rows for the parts the heads share, then over
// (b, h), each walking its phase through time. Allocates nothing: it runs on
// every decode step.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_prepare_steps.h"
#include "ops/cpu/mamba3_step_scalars.h"
#include "ops/cpu/mamba3_workspace.h"
#include "ops/cpu/rotary.h"
#include "ops/cpu/vec_math.h"

namespace ssm::cpu {

namespace m3 {
namespace {

constexpr int64_t kPrefetchSteps = 8;
constexpr int64_t kLineFloats = 16;  // a 64-byte cache line

// out = RMSNorm(in) * w over n entries.
inline void normalize(const float* in, const float* w, int64_t n, float eps, float* out) {
  const float s = static_cast<float>(inv_rms_vec(in, n, eps));
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s * w[i];
}

}  // namespace

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
      scaled_tanh(&ang(row, 0), kPi, ang_rate + row * S, S);
    }
  });
}

PrepareHeads::PrepareHeads(const ops::Mamba3PrepareArgs& a)
    : a_(a),
      d_(a),
      dt_bias_(a.dt_bias.data<float>()),
      mimo_x_(in_or_null(a.mimo_x)),
      B_bias_(a.B_bias.data<float>()),
      C_bias_(a.C_bias.data<float>()),
      B_normed_(a.B_normed.data<float>()),
      C_normed_(a.C_normed.data<float>()),
      ang_rate_(a.ang_rate.data<float>()),
      phase_io_(out(a.phase)),
      phases_(out_or_null(a.phases)),
      dt_out_(out(a.dt)),
      A_out_(out(a.A)),
      lam_out_(out(a.lam)) {}

void PrepareHeads::scalars(int64_t i) const {
  const int64_t b = i / d_.H, h = i % d_.H, L = d_.L, at = i * L;
  const auto ddt = in_block(a_.ddt), ddA = in_block(a_.ddA), trap = in_block(a_.trap);
  // The head's columns gathered into the outputs, then mapped in place.
  for (int64_t t = 0; t < L; ++t) {
    dt_out_[at + t] = ddt(b * L + t, h);
    A_out_[at + t] = ddA(b * L + t, h);
    lam_out_[at + t] = trap(b * L + t, h);
  }
  mamba3_step_scalars(dt_out_ + at, A_out_ + at, lam_out_ + at, L, dt_bias_[h], a_.A_floor);
}

void PrepareHeads::vectors(int64_t i, int64_t t, float* q, float* k, float* v) const {
  const int64_t H = d_.H, P = d_.P, N = d_.N, G = d_.G, R = d_.R, S = d_.S;
  const int64_t b = i / H, h = i % H, g = h / (H / G), row = b * d_.L + t, step = i * d_.L + t;
  const float dt = dt_out_[step];
  float* phase = phase_io_ + i * S;
  const float* rate = ang_rate_ + row * S;
  for (int64_t j = 0; j < S; ++j) phase[j] += rate[j] * dt;
  if (phases_) std::copy(phase, phase + S, phases_ + step * S);

  // q, k: normed C, B of group g (rank r at stride G N) plus the head's
  // biases, turned by the phase.
  const int64_t at = (row * R * G + g) * N;
  biased_turn({C_normed_ + at, G * N, C_bias_ + h * R * N, q},
              {B_normed_ + at, G * N, B_bias_ + h * R * N, k}, R, N, phase, S,
              a_.pairs == ops::RotaryPairs::kAdjacent);
  const auto x = in_block(a_.x);
  const float* xh = &x(row, h * P);
  // A head's x is P floats of a projection row some 10 KB long, and a head
  // walks its steps one row at a time: the loads of the rows missed the
  // caches and were most of this function's time (perf), so the row
  // kPrefetchSteps steps ahead is fetched now.
  // The same for the normed B and C rows the turns read (2 R N floats a
  // step): the loads of the turns' inputs were most of their samples.
  if (t + kPrefetchSteps < d_.L) {
    for (int64_t p = 0; p < P; p += kLineFloats)
      __builtin_prefetch(&x(row + kPrefetchSteps, h * P + p));
    const int64_t ahead = at + kPrefetchSteps * R * G * N;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t n = 0; n < N; n += kLineFloats) {
        __builtin_prefetch(C_normed_ + ahead + r * G * N + n);
        __builtin_prefetch(B_normed_ + ahead + r * G * N + n);
      }
  }
  for (int64_t r = 0; r < R; ++r) {
    const float* mx = mimo_x_ ? mimo_x_ + (h * R + r) * P : nullptr;
    for (int64_t p = 0; p < P; ++p) v[r * P + p] = mx ? xh[p] * mx[p] : xh[p];
  }
}

void PrepareHeads::prefetch_params(int64_t i) const {
  const int64_t h = i % d_.H, RN = d_.R * d_.N, RP = d_.R * d_.P;
  for (int64_t j = 0; j < RN; j += kLineFloats) {
    __builtin_prefetch(B_bias_ + h * RN + j);
    __builtin_prefetch(C_bias_ + h * RN + j);
  }
  if (mimo_x_)
    for (int64_t j = 0; j < RP; j += kLineFloats) __builtin_prefetch(mimo_x_ + h * RP + j);
}

}  // namespace m3

void mamba3_prepare(Context& ctx, const ops::Mamba3PrepareArgs& a) {
  const m3::PrepareHeads heads(a);
  const m3::PrepareDims& d = heads.dims();
  m3::prepare_rows(ctx, a, d);
  // Per (b, h): the step scalars, the phase walk, q, k and v.
  float *q = m3::out(a.q), *k = m3::out(a.k), *v = m3::out(a.v);
  ctx.pool().parallel_for(d.B * d.H, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      heads.scalars(i);
      for (int64_t t = 0; t < d.L; ++t) {
        const int64_t step = i * d.L + t;
        heads.vectors(i, t, q + step * d.R * d.N, k + step * d.R * d.N, v + step * d.R * d.P);
      }
    }
  });
}

}  // namespace ssm::cpu
