// mamba3_scan backward on the GPU, the recurrence of ref/mamba3_scan_backward.cpp
// walked back in time with F32 states, written to be plainly right first:
// a block per (b, h), a thread per state entry (p, n) (strided).
//
//   forward   each thread runs its entries' recurrence from the starting
//             state and keeps the state before every kMamba3BackwardChunk-th
//             step (checkpoints; the recurrence of an entry reads no other
//             entry, so this needs no barrier);
//   backward  chunk by chunk from the last: the chunk's states recomputed
//             from its checkpoint, then its steps from the last: G_t =
//             alpha_{t+1} G_{t+1} + sum_r d_o_t,r q_t,r^T (each thread its
//             own entries), the decay's three scalars summed over the block
//             in double, dU = gamma_t G_t + beta_{t+1} G_{t+1} in shared
//             memory, then dq, dk (sums over p) and dv (sums over n).
// dD is a separate sum per head over (b, t, r, p), in double. Every sum has a
// fixed order: results repeat bit for bit.
#include <algorithm>

#include "ops/cuda/launch_mamba3_attention_backward.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = kMamba3BackwardChunk;

// Sums v over the block (every thread gets the total); red: kThreads / 32
// doubles of shared memory. Begins and ends with the block in step.
__device__ double block_sum(double v, double* red) {
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += red[w];
  __syncthreads();
  return total;
}

struct Coef {
  float alpha, beta, gamma;
};
__device__ Coef coef_at(const float* A, const float* dt, const float* lam, int64_t t) {
  const float alpha = expf(A[t] * dt[t]);
  return {alpha, (1.f - lam[t]) * dt[t] * alpha, lam[t] * dt[t]};
}

__global__ void __launch_bounds__(kThreads) scan_backward_kernel(Mamba3ScanBackwardLaunch a) {
  extern __shared__ float smem[];
  __shared__ double red[3][kThreads / 32];
  const int64_t bh = blockIdx.x, h = bh % a.H;
  const int64_t L = a.L, R = a.R, N = a.N, P = a.P, PN = P * N, RN = R * N, RP = R * P;
  const int64_t Np = N + 1;  // dU's row pitch: dv's threads (over p) hit different banks
  float* G = smem;           // PN: the state gradient, entry i by its own thread
  float* dU = smem + PN;     // P x Np
  const float* q = a.q + bh * L * RN;
  const float* k = a.k + bh * L * RN;
  const float* v = a.v + bh * L * RP;
  const float* d_o = a.d_o + bh * L * RP;
  const float* dt = a.dt + bh * L;
  const float* A = a.A + bh * L;
  const float* lam = a.lam + bh * L;
  const float* kp = a.k_prev ? a.k_prev + bh * RN : nullptr;
  const float* vp = a.v_prev ? a.v_prev + bh * RP : nullptr;
  const int64_t chunks = (L + kChunk - 1) / kChunk;
  float* ckpt = a.checkpoints + bh * chunks * PN;
  float* cs = a.chunk_states + bh * (kChunk + 1) * PN;
  const float Dh = a.D ? a.D[h] : 0.f;

  // U_t[p, n] = sum_r v_t,r[p] k_t,r[n]; t = -1: the carried previous step.
  auto U = [&](int64_t t, int64_t p, int64_t n) {
    float u = 0.f;
    if (t < 0) {
      if (kp)
        for (int64_t r = 0; r < R; ++r) u += vp[r * P + p] * kp[r * N + n];
      return u;
    }
    for (int64_t r = 0; r < R; ++r) u += v[(t * R + r) * P + p] * k[(t * R + r) * N + n];
    return u;
  };
  // S_t from S_{t-1} for entries [t0, t1): states[j] = S_{t0-1+j} when keep.
  auto walk = [&](int64_t i, float S, int64_t t0, int64_t t1, float* states, bool checkpoints) {
    const int64_t p = i / N, n = i % N;
    float u_prev = U(t0 - 1, p, n);
    if (states) states[i] = S;
    for (int64_t t = t0; t < t1; ++t) {
      if (checkpoints && t % kChunk == 0) ckpt[(t / kChunk) * PN + i] = S;
      const Coef c = coef_at(A, dt, lam, t);
      const float u = U(t, p, n);
      S = c.alpha * S + c.beta * u_prev + c.gamma * u;
      u_prev = u;
      if (states) states[(t - t0 + 1) * PN + i] = S;
    }
  };

  for (int64_t i = threadIdx.x; i < PN; i += kThreads) {
    walk(i, a.ssm ? a.ssm[bh * PN + i] : 0.f, 0, L, nullptr, true);
    G[i] = 0.f;
  }

  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * kChunk, t1 = min(L, t0 + kChunk);
    for (int64_t i = threadIdx.x; i < PN; i += kThreads)
      walk(i, ckpt[c * PN + i], t0, t1, cs, false);
    __syncthreads();  // every state of the chunk written (dq reads across entries)
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const Coef ct = coef_at(A, dt, lam, t);
      const Coef cn = t + 1 < L ? coef_at(A, dt, lam, t + 1) : Coef{0.f, 0.f, 0.f};
      const float* S_prev = cs + (t - t0) * PN;
      const float* S_t = cs + (t - t0 + 1) * PN;
      double dalpha = 0, dbeta = 0, dgamma = 0;
      for (int64_t i = threadIdx.x; i < PN; i += kThreads) {
        const int64_t p = i / N, n = i % N;
        const float g_next = G[i];
        float g = cn.alpha * g_next;
        for (int64_t r = 0; r < R; ++r) g += d_o[(t * R + r) * P + p] * q[(t * R + r) * N + n];
        dalpha += static_cast<double>(g) * S_prev[i];
        dbeta += static_cast<double>(g) * U(t - 1, p, n);
        dgamma += static_cast<double>(g) * U(t, p, n);
        dU[p * Np + n] = ct.gamma * g + cn.beta * g_next;
        G[i] = g;
      }
      dalpha = block_sum(dalpha, red[0]);  // its barriers also publish dU
      dbeta = block_sum(dbeta, red[1]);
      dgamma = block_sum(dgamma, red[2]);
      if (threadIdx.x == 0) {
        // alpha = exp(A dt), beta = (1 - lam) dt alpha, gamma = lam dt.
        const double At = A[t], dtt = dt[t], lt = lam[t], al = exp(At * dtt);
        const double dall = dalpha + dbeta * (1 - lt) * dtt;
        a.dA[bh * L + t] = static_cast<float>(dall * al * dtt);
        a.ddt[bh * L + t] =
            static_cast<float>(dall * al * At + dbeta * (1 - lt) * al + dgamma * lt);
        a.dlam[bh * L + t] = static_cast<float>(-dbeta * dtt * al + dgamma * dtt);
      }
      for (int64_t o = threadIdx.x; o < RN; o += kThreads) {
        const int64_t r = o / N, n = o % N;
        const float* go = d_o + (t * R + r) * P;
        const float* vt = v + (t * R + r) * P;
        float sq = 0.f, sk = 0.f;
        for (int64_t p = 0; p < P; ++p) {
          sq += S_t[p * N + n] * go[p];
          sk += dU[p * Np + n] * vt[p];
        }
        a.dq[(bh * L + t) * RN + o] = sq;
        a.dk[(bh * L + t) * RN + o] = sk;
      }
      for (int64_t o = threadIdx.x; o < RP; o += kThreads) {
        const int64_t r = o / P, p = o % P;
        const float* kt = k + (t * R + r) * N;
        float sv = Dh * d_o[(t * R + r) * P + p];
        for (int64_t n = 0; n < N; ++n) sv += dU[p * Np + n] * kt[n];
        a.dv[(bh * L + t) * RP + o] = sv;
      }
      __syncthreads();  // dU read by all before the next step writes it
    }
  }
}

// dD[h] += sum over b, t, r, p of d_o v: a block per head.
__global__ void __launch_bounds__(kThreads) skip_grad_kernel(Mamba3ScanBackwardLaunch a) {
  __shared__ double red[kThreads / 32];
  const int64_t h = blockIdx.x, per = a.L * a.R * a.P;
  double acc = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t base = (b * a.H + h) * per;
    for (int64_t i = threadIdx.x; i < per; i += kThreads)
      acc += static_cast<double>(a.d_o[base + i]) * a.v[base + i];
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) a.dD[h] = static_cast<float>(a.dD[h] + acc);
}

}  // namespace

int64_t mamba3_scan_backward_smem(int64_t P, int64_t N) {
  return (P * N + P * (N + 1)) * static_cast<int64_t>(sizeof(float));
}

void launch_mamba3_scan_backward(const Mamba3ScanBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.H * a.L == 0) return;
  const int64_t smem = mamba3_scan_backward_smem(a.P, a.N);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(scan_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  scan_backward_kernel<<<static_cast<unsigned>(a.B * a.H), kThreads, static_cast<size_t>(smem),
                         s>>>(a);
  if (a.dD) skip_grad_kernel<<<static_cast<unsigned>(a.H), kThreads, 0, s>>>(a);
}

}  // namespace ssm::cuda
