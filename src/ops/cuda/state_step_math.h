// The arithmetic of the Mamba-2 and Mamba-3 state steps, written once for
// the kernels that must give one another's bits: ssd_scan_kernel and
// ssd_step_kernel (conv_ssd.cu) and the many-sequence step's two launches
// (ssd_step_wide.cu); Mamba-3's scan_kernel (mamba3_scan.cu) and its
// many-sequence step (mamba3_scan_step.cu).
// A sequence's step must not depend on the batch it runs in (ssm serve
// batches sessions, and a session's tokens are those it gets alone), yet
// launch_ssd_step takes another kernel from about eight sequences on. So
// every multiply-add is an explicit fmaf (nvcc's contraction of a * b + c
// is not left to choose per kernel), and a state row's y sum has one order:
// thread j of a row's S owns its PER adjacent entries n = j PER + k, sums
// them in k order, then the S partial sums are added by xor shuffles (S/2,
// ..., 1). Included by .cu files only.
#pragma once

#include <cmath>

namespace ssm::cuda {

__device__ __forceinline__ float silu(float z) { return z / (1.f + expf(-z)); }
__device__ __forceinline__ float softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

// One tap of the depthwise convolution (the sum runs bias, then the taps
// oldest first, then the new input's).
__device__ __forceinline__ float conv_tap(float acc, float w, float v) { return fmaf(w, v, acc); }

// dt of head h from the in projection's raw column.
__device__ __forceinline__ float step_dt(float raw, float dt_bias, float dt_min, float dt_max) {
  return fminf(fmaxf(softplus(raw + dt_bias), dt_min), dt_max);
}

// A state entry's step: h exp(dt A) + (dt x) B_n.
__device__ __forceinline__ float step_entry(float h, float decay, float coef, float b) {
  return fmaf(decay, h, coef * b);
}

// The entry's term of y: acc + h C_n.
__device__ __forceinline__ float y_term(float acc, float h, float c) { return fmaf(h, c, acc); }

// A state row's y: thread j of the row's W adjacent lanes sums its PER
// entries n = j PER + e against C (or q) in e order, then the W partial
// sums are added by xor shuffles (W/2, ..., 1); every lane gets the sum.
template <int PER>
__device__ __forceinline__ float row_y(const float (&h)[PER], const float* c, int j, int N, unsigned mask,
                                       int W) {
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    const int n = j * PER + e;
    if (n < N) acc = y_term(acc, h[e], c[n]);
  }
  for (int o = W / 2; o > 0; o /= 2) acc += __shfl_xor_sync(mask, acc, o, W);
  return acc;
}

// y + D x.
__device__ __forceinline__ float y_out(float y, float D, float x) { return fmaf(D, x, y); }

// Mamba-3: a rank's term of U_n = sum_r v_r k_r,n.
__device__ __forceinline__ float rank_term(float u, float v, float k) { return fmaf(v, k, u); }

// Mamba-3's step scalars from dt, lambda and A: alpha = exp(A dt), beta =
// (1 - lambda) dt alpha, gamma = lambda dt.
struct Mamba3Coefs {
  float alpha, beta, gamma;
};
__device__ __forceinline__ Mamba3Coefs mamba3_coefs(float dt, float lam, float A) {
  const float alpha = expf(A * dt);
  return {alpha, (1.f - lam) * dt * alpha, lam * dt};
}

// Mamba-3's state entry: alpha S + beta U_{t-1} + gamma U_t.
__device__ __forceinline__ float mamba3_entry(float s, const Mamba3Coefs& c, float up, float u) {
  return fmaf(c.alpha, s, fmaf(c.beta, up, c.gamma * u));
}

}  // namespace ssm::cuda
