// Attention with a KV cache on the GPU, written for correctness first (the
// hybrids' few attention layers): append_kv a thread per channel pair of a
// token (rotation angles in double, like ref); attention a block per
// (sequence, head, query), the scores of its keys in shared memory, the
// softmax and the weighted sum of values in F32.
#include <algorithm>

#include "ops/cuda/launch_hybrid.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void append_kv_kernel(AttentionLaunch a) {
  const int64_t row = blockIdx.x, b = row / a.L, t = row % a.L, pos = a.past[b] + t;
  float* q = a.qkv.p + row * a.qkv.stride;
  float* k = q + a.H * a.hd;
  const float* v = k + a.Hkv * a.hd;
  // Rotation: head-local channel e < half is paired with e + half.
  const int64_t rot = (a.H + a.Hkv) * a.half;
  for (int64_t i = threadIdx.x; i < rot; i += blockDim.x) {
    const int64_t head = i / a.half, e = i % a.half;
    float* x = q + head * a.hd;  // k's heads follow q's in the row
    double sn, cs;
    sincos(static_cast<double>(pos) * static_cast<double>(a.inv_freq[e]), &sn, &cs);
    const double x0 = x[e], x1 = x[e + a.half];
    x[e] = static_cast<float>(x0 * cs - x1 * sn);
    x[e + a.half] = static_cast<float>(x0 * sn + x1 * cs);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.Hkv * a.hd; i += blockDim.x) {
    const int64_t h = i / a.hd, e = i % a.hd;
    const int64_t at = ((b * a.Hkv + h) * a.capacity + pos) * a.hd + e;
    a.k_cache[at] = k[i];
    a.v_cache[at] = v[i];
  }
}

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
    r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

__global__ void attention_kernel(AttentionLaunch a) {
  extern __shared__ float p[];  // max_keys scores
  __shared__ float scratch[kThreads / 32];
  const int64_t row = blockIdx.x / a.H, h = blockIdx.x % a.H, b = row / a.L, t = row % a.L;
  const int64_t j = h / (a.H / a.Hkv), n = a.past[b] + t + 1;
  const float* q = a.qkv.p + row * a.qkv.stride + h * a.hd;
  const float* K = a.k_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  const float* V = a.v_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
    float d = 0.f;
    for (int64_t e = 0; e < a.hd; ++e) d += q[e] * K[s * a.hd + e];
    p[s] = a.scale * d;
    mx = fmaxf(mx, p[s]);
  }
  mx = block_reduce(mx, true, scratch);
  float sum = 0.f;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) sum += p[s] = expf(p[s] - mx);
  sum = block_reduce(sum, false, scratch);  // its barrier also publishes p
  const float inv = 1.f / sum;
  float* o = a.out.p + row * a.out.stride + h * a.hd;
  for (int64_t e = threadIdx.x; e < a.hd; e += blockDim.x) {
    float acc = 0.f;
    for (int64_t s = 0; s < n; ++s) acc += p[s] * V[s * a.hd + e];
    o[e] = acc * inv;
  }
}

}  // namespace

void launch_attention_append_kv(const AttentionLaunch& a, cudaStream_t s) {
  if (a.B * a.L == 0) return;
  append_kv_kernel<<<static_cast<unsigned>(a.B * a.L), kThreads, 0, s>>>(a);
}

void launch_attention(const AttentionLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  const size_t smem = static_cast<size_t>(std::max<int64_t>(1, a.max_keys)) * sizeof(float);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  attention_kernel<<<static_cast<unsigned>(a.B * a.L * a.H), kThreads, smem, s>>>(a);
}

}  // namespace ssm::cuda
