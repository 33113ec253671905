// RMSNorm, the gated grouped norm and the embedding lookup: one block per
// row (or per group of a row), sums in a fixed order so results repeat
// exactly between runs. Also the second launch of ssd_step (launch.h).
#include <cstdint>

#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/row_pieces.h"

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

// The block-per-row kernels run a decode step's norms, between its
// few-row projections: launched overlapped (overlap_launch.h), the next
// projection's weight loads start while the norm runs, and the norm's
// launch while the kernel before it finishes; it reads and writes nothing
// before the wait.
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(ConstRows x, const float* w, float eps, Rows out) {
  let_next_kernel_start();
  wait_for_previous_kernel();
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

// Prefill's many rows: a warp per row (or per norm group of a row), eight
// a block, the row's values in registers between the sum of squares and the
// scaling, loaded in 16-byte pieces. A 1024-thread block per row (the
// decode step's shape) left 2 blocks a multiprocessor, each stalled on its
// own barriers: rms_norm took 0.13 ms and gated_rms_norm 0.31 ms at 8 x
// 2048 rows of 768 / 1536 (H100), 3-4 times their memory bound. kPieces:
// float4 pieces per lane, the row at most 128 kPieces wide.
constexpr int kRowWarps = 8;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float4 silu4(float4 z) { return float4{silu(z.x), silu(z.y), silu(z.z), silu(z.w)}; }
__device__ float4 mul4(float4 a, float4 b) { return float4{a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w}; }
__device__ float4 scale4(float4 a, float r) { return float4{a.x * r, a.y * r, a.z * r, a.w * r}; }
__device__ float squares4(float4 a) { return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w; }

template <int kPieces>
__global__ void __launch_bounds__(kRowWarps * 32)
    rms_norm_rows_kernel(ConstRows x, const float* w, float eps, Rows out) {
  const int64_t row = blockIdx.x * int64_t{kRowWarps} + threadIdx.x / 32;
  if (row >= x.rows) return;  // whole warps: the shuffles stay within one
  const int lane = threadIdx.x % 32, n4 = static_cast<int>(x.cols / 4);
  const float4* src = reinterpret_cast<const float4*>(x.p + row * x.stride);
  float4 v[kPieces];
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int j = lane + 32 * i;
    v[i] = j < n4 ? src[j] : float4{0.f, 0.f, 0.f, 0.f};
  }
#pragma unroll
  for (int i = 0; i < kPieces; ++i) ss += squares4(v[i]);
  const float r = rsqrtf(warp_sum(ss) / static_cast<float>(x.cols) + eps);
  float4* dst = reinterpret_cast<float4*>(out.p + row * out.stride);
  const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int j = lane + 32 * i;
    if (j < n4) dst[j] = w ? mul4(scale4(v[i], r), w4[j]) : scale4(v[i], r);
  }
}

// Warp per (row, group of n channels); o may be y (read before written).
template <int kPieces>
__global__ void __launch_bounds__(kRowWarps * 32)
    gated_rms_norm_rows_kernel(ConstRows y, ConstRows z, const float* w, int64_t n, float eps,
                               bool norm_before_gate, Rows out) {
  const int64_t groups = y.cols / n, item = blockIdx.x * int64_t{kRowWarps} + threadIdx.x / 32;
  if (item >= y.rows * groups) return;  // whole warps
  const int64_t row = item / groups, g0 = (item % groups) * n;
  const int lane = threadIdx.x % 32, n4 = static_cast<int>(n / 4);
  const float4* y4 = reinterpret_cast<const float4*>(y.p + row * y.stride + g0);
  const float4* z4 = reinterpret_cast<const float4*>(z.p + row * z.stride + g0);
  float4* o4 = reinterpret_cast<float4*>(out.p + row * out.stride + g0);
  float4 v[kPieces];  // y, or y silu(z) when the gate comes first
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int j = lane + 32 * i;
    v[i] = j < n4 ? y4[j] : float4{0.f, 0.f, 0.f, 0.f};
  }
  if (!w || !norm_before_gate) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int j = lane + 32 * i;
      if (j < n4) v[i] = mul4(v[i], silu4(z4[j]));
    }
  }
  if (!w) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      if (lane + 32 * i < n4) o4[lane + 32 * i] = v[i];
    return;
  }
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) ss += squares4(v[i]);
  const float r = rsqrtf(warp_sum(ss) / static_cast<float>(n) + eps);
  const float4* w4 = reinterpret_cast<const float4*>(w + g0);
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int j = lane + 32 * i;
    if (j < n4) {
      const float4 o = mul4(scale4(v[i], r), w4[j]);
      o4[j] = norm_before_gate ? mul4(o, silu4(z4[j])) : o;
    }
  }
}

// Block (row, group g of n channels).
__global__ void __launch_bounds__(kThreads)
    gated_rms_norm_kernel(ConstRows y, ConstRows z, const float* w, int64_t n, float eps,
                          bool norm_before_gate, Rows out) {
  let_next_kernel_start();  // as rms_norm_kernel
  wait_for_previous_kernel();
  const int64_t groups = y.cols / n, row = blockIdx.x / groups, g0 = (blockIdx.x % groups) * n;
  gated_norm_group(y.p + row * y.stride + g0, z.p + row * z.stride + g0, w ? w + g0 : nullptr, n, eps,
                   norm_before_gate, out.p + row * out.stride + g0);
}

// ssd_step's second launch when gated, block (b, norm group q): the gated
// norm of the step's y, in place in out.
__global__ void __launch_bounds__(kThreads) ssd_step_norm_kernel(SsdStepLaunch a) {
  const int64_t HP = a.H * a.P, groups = HP / a.norm_group;
  const int64_t b = blockIdx.x / groups, q = blockIdx.x % groups;
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

// Whether the warp-per-row kernels take these rows: enough of them to fill
// the machine with warps (a decode step's few rows take the wide block), at
// most 512 float4 pieces of 16-byte aligned floats.
bool rows_kernel_fits(int64_t rows, int64_t n, int64_t stride_a, int64_t stride_b, const void* a,
                      const void* b, const void* c, const float* w) {
  return rows >= 256 && n % 4 == 0 && n <= 32 * 4 * 16 && stride_a % 4 == 0 && stride_b % 4 == 0 &&
         aligned16(a) && aligned16(b) && aligned16(c) && (!w || aligned16(w));
}


template <int kPieces>
struct RmsNormRows {
  static void run(ConstRows x, const float* w, float eps, Rows out, cudaStream_t s) {
    const unsigned blocks = static_cast<unsigned>((x.rows + kRowWarps - 1) / kRowWarps);
    rms_norm_rows_kernel<kPieces><<<blocks, kRowWarps * 32, 0, s>>>(x, w, eps, out);
  }
};

template <int kPieces>
struct GatedRmsNormRows {
  static void run(ConstRows y, ConstRows z, const float* w, int64_t n, float eps, bool norm_before_gate,
                  Rows out, cudaStream_t s) {
    const int64_t items = y.rows * (y.cols / n);
    const unsigned blocks = static_cast<unsigned>((items + kRowWarps - 1) / kRowWarps);
    gated_rms_norm_rows_kernel<kPieces><<<blocks, kRowWarps * 32, 0, s>>>(y, z, w, n, eps,
                                                                          norm_before_gate, out);
  }
};

}  // namespace

void launch_rms_norm(ConstRows x, const float* w, float eps, Rows out, cudaStream_t s, bool overlap) {
  if (x.rows == 0) return;
  if (x.cols > 0 && rows_kernel_fits(x.rows, x.cols, x.stride, out.stride, x.p, out.p, out.p, w)) {
    with_pieces<RmsNormRows>(pieces_for(x.cols), x, w, eps, out, s);
    return;
  }
  launch_overlapped(overlap, rms_norm_kernel, dim3(static_cast<unsigned>(x.rows)), dim3(kThreads), 0, s, x, w,
                    eps, out);
}

void launch_gated_rms_norm(ConstRows y, ConstRows z, const float* w, int64_t group, float eps,
                           bool norm_before_gate, Rows out, cudaStream_t s, bool overlap) {
  const int64_t n = group > 0 ? group : y.cols;
  if (y.rows == 0 || n == 0) return;
  if (rows_kernel_fits(y.rows * (y.cols / n), n, y.stride, z.stride, y.p, z.p, out.p, w) &&
      out.stride % 4 == 0) {
    with_pieces<GatedRmsNormRows>(pieces_for(n), y, z, w, n, eps, norm_before_gate, out, s);
    return;
  }
  launch_overlapped(overlap, gated_rms_norm_kernel, dim3(static_cast<unsigned>(y.rows * (y.cols / n))),
                    dim3(kThreads), 0, s, y, z, w, n, eps, norm_before_gate, out);
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
