// RMSNorm, the gated grouped norm and the embedding lookup: one block per
// row (or per group of a row), sums in a fixed order so results repeat
// exactly between runs. Also the second launch of ssd_step (launch.h).
#include "ops/cuda/launch_ssd_step.h"

namespace ssm::cuda {
namespace {

// A decode step's rows are one block each (B = 1: a single block on one
// multiprocessor), so the block is wide: 1024 threads take a 1536-wide row
// in two loads each, where 256 threads took six dependent rounds (the gated
// norm measured 8.9 us at 256).
constexpr int kThreads = 1024;  // __launch_bounds__ keeps each kernel within 64 registers a thread

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

__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(ConstRows x, const float* w, float eps, Rows out) {
  const float* row = x.p + blockIdx.x * x.stride;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < x.cols; i += kThreads) ss += row[i] * row[i];
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(x.cols) + eps);
  float* o = out.p + blockIdx.x * out.stride;  // may be row: each element read before written
  for (int64_t i = threadIdx.x; i < x.cols; i += kThreads) o[i] = w ? row[i] * r * w[i] : row[i] * r;
}

// One group of n channels of a row, normalised by the whole block; o may
// be yr (each element is read before it is written, by the same thread).
__device__ void gated_norm_group(const float* yr, const float* zr, const float* w, int64_t n, float eps,
                                 bool norm_before_gate, float* o) {
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
    o[i] = v * r * w[i] * (norm_before_gate ? gate : 1.f);
  }
}

// Block (row, group g of n channels).
__global__ void __launch_bounds__(kThreads)
    gated_rms_norm_kernel(ConstRows y, ConstRows z, const float* w, int64_t n, float eps,
                          bool norm_before_gate, Rows out) {
  const int64_t groups = y.cols / n, row = blockIdx.x / groups, g0 = (blockIdx.x % groups) * n;
  gated_norm_group(y.p + row * y.stride + g0, z.p + row * z.stride + g0, w ? w + g0 : nullptr, n, eps,
                   norm_before_gate, out.p + row * out.stride + g0);
}

// ssd_step's second launch, block (b, norm group q): the shift of the B and
// C channels' convolution state (every block of the first launch has read
// it by now; these channels are split over the row's groups), then the
// gated norm of the step's y, in place in out.
__global__ void __launch_bounds__(kThreads) ssd_step_norm_kernel(SsdStepLaunch a) {
  const int64_t HP = a.H * a.P, groups = HP / a.norm_group;
  const int64_t b = blockIdx.x / groups, q = blockIdx.x % groups;
  const int64_t C = HP + 2 * a.G * a.N, W = a.K - 1;
  float* cst = a.conv_state + b * W * C;
  const float* in = a.xbc.p + b * a.xbc.stride;
  for (int64_t c = HP + q * kThreads + threadIdx.x; c < C && W > 0; c += groups * kThreads) {
    for (int64_t k = 1; k < W; ++k) cst[(k - 1) * C + c] = cst[k * C + c];
    cst[(W - 1) * C + c] = in[c];
  }
  const int64_t g0 = q * a.norm_group;
  float* o = a.out.p + b * a.out.stride + g0;
  gated_norm_group(o, a.z.p + b * a.z.stride + g0, a.norm_weight ? a.norm_weight + g0 : nullptr,
                   a.norm_group, a.eps, a.norm_before_gate, o);
}

__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const void* ids, bool ids_i64, const float* table, Rows out, float scale) {
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

void launch_ssd_step_norm(const SsdStepLaunch& a, cudaStream_t s) {
  if (a.B == 0) return;
  ssd_step_norm_kernel<<<static_cast<unsigned>(a.B * (a.H * a.P / a.norm_group)), kThreads, 0, s>>>(a);
}

}  // namespace ssm::cuda
