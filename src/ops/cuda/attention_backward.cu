// Attention backward on the GPU (ops/attention.h: fresh sequences, causal,
// grouped-query), plain kernels in F32 like the forward (attention.cu):
//   dq     a block per (sequence, head, query t): the scores of keys s <= t
//          in shared memory, softmax, delta = rowsum(dO o O), dS = P (dO V^T
//          - delta), dq = scale dS K; the row's maximum, 1 / sum and delta
//          kept for the next kernel;
//   dk dv  a block per (sequence, kv head, key s): for each query head of
//          the group, P and dS of the queries t >= s recomputed from those
//          statistics (the same float operations as above), then dk =
//          scale sum dS q and dv = sum P dO, heads and queries in order.
// rope_backward: a thread per rotary pair, the angle in double like
// append_kv. No atomics: results repeat bit for bit.
#include <cmath>

#include "ops/cuda/launch_mamba3_attention_backward.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 128;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

__device__ float dot(const float* x, const float* y, int64_t n) {
  float d = 0.f;
  for (int64_t e = 0; e < n; ++e) d += x[e] * y[e];
  return d;
}

__global__ void __launch_bounds__(kThreads) dq_kernel(AttentionBackwardLaunch a) {
  extern __shared__ float p[];  // L: scores, then dS
  __shared__ float scratch[kThreads / 32];
  const int64_t row = blockIdx.x / a.H, h = blockIdx.x % a.H, b = row / a.L, t = row % a.L;
  const int64_t hd = a.hd, j = h / (a.H / a.Hkv), n = t + 1;
  const float* q = a.q.p + row * a.q.stride + h * hd;
  const float* o = a.out.p + row * a.out.stride + h * hd;
  const float* go = a.dout.p + row * a.dout.stride + h * hd;
  const float* K = a.k + (b * a.Hkv + j) * a.L * hd;
  const float* V = a.v + (b * a.Hkv + j) * a.L * hd;
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < n; s += kThreads) {
    p[s] = a.scale * dot(q, K + s * hd, hd);
    mx = fmaxf(mx, p[s]);
  }
  mx = block_reduce(mx, true, scratch);
  float sum = 0.f;
  for (int64_t s = threadIdx.x; s < n; s += kThreads) sum += p[s] = expf(p[s] - mx);
  sum = block_reduce(sum, false, scratch);
  const float inv = 1.f / sum;
  float dl = 0.f;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) dl += go[e] * o[e];
  const float delta = block_reduce(dl, false, scratch);
  // Each thread rewrites its own scores as dS.
  for (int64_t s = threadIdx.x; s < n; s += kThreads)
    p[s] = p[s] * inv * (dot(go, V + s * hd, hd) - delta);
  __syncthreads();
  float* dq = a.dq.p + row * a.dq.stride + h * hd;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
    float acc = 0.f;
    for (int64_t s = 0; s < n; ++s) acc += p[s] * K[s * hd + e];
    dq[e] = a.scale * acc;
  }
  if (threadIdx.x == 0) {
    const int64_t BHL = a.B * a.H * a.L, at = (b * a.H + h) * a.L + t;
    a.stats[at] = mx;
    a.stats[BHL + at] = inv;
    a.stats[2 * BHL + at] = delta;
  }
}

__global__ void __launch_bounds__(kThreads) dkv_kernel(AttentionBackwardLaunch a) {
  extern __shared__ float smem[];
  const int64_t L = a.L, hd = a.hd, group = a.H / a.Hkv;
  const int64_t s = blockIdx.x % L, bj = blockIdx.x / L, b = bj / a.Hkv, j = bj % a.Hkv;
  float* pw = smem;             // L - s: P of queries t >= s
  float* dsw = smem + L;        // L - s: dS
  float* acc_k = smem + 2 * L;  // hd, entry e by its own thread
  float* acc_v = acc_k + hd;    // hd
  const float* Ks = a.k + ((b * a.Hkv + j) * L + s) * hd;
  const float* Vs = a.v + ((b * a.Hkv + j) * L + s) * hd;
  const int64_t BHL = a.B * a.H * L;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) acc_k[e] = acc_v[e] = 0.f;
  for (int64_t h = j * group; h < (j + 1) * group; ++h) {
    for (int64_t t = s + threadIdx.x; t < L; t += kThreads) {
      const int64_t row = b * L + t, st = (b * a.H + h) * L + t;
      const float* q = a.q.p + row * a.q.stride + h * hd;
      const float* go = a.dout.p + row * a.dout.stride + h * hd;
      const float pr = expf(a.scale * dot(q, Ks, hd) - a.stats[st]) * a.stats[BHL + st];
      pw[t - s] = pr;
      dsw[t - s] = pr * (dot(go, Vs, hd) - a.stats[2 * BHL + st]);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
      float ak = 0.f, av = 0.f;
      for (int64_t t = s; t < L; ++t) {
        const int64_t row = b * L + t;
        ak += dsw[t - s] * a.q.p[row * a.q.stride + h * hd + e];
        av += pw[t - s] * a.dout.p[row * a.dout.stride + h * hd + e];
      }
      acc_k[e] += a.scale * ak;
      acc_v[e] += av;
    }
    __syncthreads();  // pw and dsw read by all before the next head writes them
  }
  const int64_t row = b * L + s;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
    a.dk.p[row * a.dk.stride + j * hd + e] = acc_k[e];
    a.dv.p[row * a.dv.stride + j * hd + e] = acc_v[e];
  }
}

__global__ void rope_backward_kernel(Rows dq, Rows dk, int64_t L, int64_t H, int64_t Hkv,
                                     int64_t hd, const float* inv_freq, int64_t half) {
  const int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t per_row = (H + Hkv) * half;
  if (u >= dq.rows * per_row) return;
  const int64_t row = u / per_row, head = (u % per_row) / half, i = u % half;
  float* x =
      head < H ? dq.p + row * dq.stride + head * hd : dk.p + row * dk.stride + (head - H) * hd;
  double sn, cs;
  sincos(static_cast<double>(row % L) * static_cast<double>(inv_freq[i]), &sn, &cs);
  // The gradient of a rotation goes back through the opposite rotation.
  const double x0 = x[i], x1 = x[i + half];
  x[i] = static_cast<float>(x0 * cs + x1 * sn);
  x[i + half] = static_cast<float>(-x0 * sn + x1 * cs);
}

}  // namespace

void launch_attention_backward(const AttentionBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  const size_t smem_q = static_cast<size_t>(a.L) * sizeof(float);
  const size_t smem_kv = static_cast<size_t>(2 * a.L + 2 * a.hd) * sizeof(float);
  if (smem_q > 48 * 1024)
    cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem_q));
  if (smem_kv > 48 * 1024)
    cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem_kv));
  dq_kernel<<<static_cast<unsigned>(a.B * a.L * a.H), kThreads, smem_q, s>>>(a);
  dkv_kernel<<<static_cast<unsigned>(a.B * a.Hkv * a.L), kThreads, smem_kv, s>>>(a);
}

void launch_rope_backward(Rows dq, Rows dk, int64_t L, int64_t H, int64_t Hkv, int64_t hd,
                          const float* inv_freq, int64_t half, cudaStream_t s) {
  const int64_t n = dq.rows * (H + Hkv) * half;
  if (n == 0) return;
  rope_backward_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(dq, dk, L, H, Hkv, hd,
                                                                              inv_freq, half);
}

}  // namespace ssm::cuda
