// RMSNorm, the gated grouped norm and the embedding lookup: one block per
// row (or per group of a row), sums in a fixed order so results repeat
// exactly between runs.
#include "ops/cuda/launch.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float silu(float z) { return z / (1.f + expf(-z)); }

// Sum over the block of v (every thread's share), the same on every thread.
__device__ float block_sum(float v) {
  __shared__ float warp_part[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_part[w];
  __syncthreads();  // warp_part is reused by the next call
  return total;
}

__global__ void rms_norm_kernel(ConstRows x, const float* w, float eps, Rows out) {
  const float* row = x.p + blockIdx.x * x.stride;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < x.cols; i += kThreads) ss += row[i] * row[i];
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(x.cols) + eps);
  float* o = out.p + blockIdx.x * out.stride;  // may be row: each element read before written
  for (int64_t i = threadIdx.x; i < x.cols; i += kThreads) o[i] = w ? row[i] * r * w[i] : row[i] * r;
}

// Block (row, group g of n channels).
__global__ void gated_rms_norm_kernel(ConstRows y, ConstRows z, const float* w, int64_t n, float eps,
                                      bool norm_before_gate, Rows out) {
  const int64_t groups = y.cols / n, row = blockIdx.x / groups, g0 = (blockIdx.x % groups) * n;
  const float* yr = y.p + row * y.stride + g0;
  const float* zr = z.p + row * z.stride + g0;
  float* o = out.p + row * out.stride + g0;
  if (!w) {
    for (int64_t i = threadIdx.x; i < n; i += kThreads) o[i] = yr[i] * silu(zr[i]);
    return;
  }
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float v = norm_before_gate ? yr[i] : yr[i] * silu(zr[i]);
    ss += v * v;
  }
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float gate = silu(zr[i]);
    const float v = norm_before_gate ? yr[i] : yr[i] * gate;
    o[i] = v * r * w[g0 + i] * (norm_before_gate ? gate : 1.f);
  }
}

__global__ void embedding_kernel(const void* ids, bool ids_i64, const float* table, Rows out, float scale) {
  const int64_t id = ids_i64 ? static_cast<const int64_t*>(ids)[blockIdx.x]
                             : static_cast<const int32_t*>(ids)[blockIdx.x];
  const float* src = table + id * out.cols;
  float* dst = out.p + blockIdx.x * out.stride;
  for (int64_t i = threadIdx.x; i < out.cols; i += kThreads) dst[i] = scale * src[i];
}

}  // namespace

void launch_rms_norm(ConstRows x, const float* w, float eps, Rows out, cudaStream_t s) {
  if (x.rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(x.rows), kThreads, 0, s>>>(x, w, eps, out);
}

void launch_gated_rms_norm(ConstRows y, ConstRows z, const float* w, int64_t group, float eps,
                           bool norm_before_gate, Rows out, cudaStream_t s) {
  const int64_t n = group > 0 ? group : y.cols;
  if (y.rows == 0 || n == 0) return;
  gated_rms_norm_kernel<<<static_cast<unsigned>(y.rows * (y.cols / n)), kThreads, 0, s>>>(
      y, z, w, n, eps, norm_before_gate, out);
}

void launch_embedding(const void* ids, bool ids_i64, const float* table, Rows out, float scale,
                      cudaStream_t s) {
  if (out.rows == 0) return;
  embedding_kernel<<<static_cast<unsigned>(out.rows), kThreads, 0, s>>>(ids, ids_i64, table, out, scale);
}

}  // namespace ssm::cuda
