// The backward of RMSNorm and of the gated grouped norm: a fixed grid of
// kPartialRows blocks, each walking rows (or (row, group) units) and adding
// its share of the weight gradient into its own partial row, which
// launch_column_sums then sums in order. No atomics: results repeat exactly.
#include "ops/cuda/launch_train.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoidf(float z) { return 1.f / (1.f + expf(-z)); }
__device__ float silu(float z) { return z * sigmoidf(z); }
__device__ float silu_grad(float z) {
  const float s = sigmoidf(z);
  return s * (1.f + z * (1.f - s));
}

__device__ float block_sum(float v) {
  __shared__ float warp_part[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_part[w];
  __syncthreads();
  return total;
}

// dx = r w g - v r^3 / n sum(v w g); dw += g v r (into the partial row).
__global__ void rms_norm_backward_kernel(ConstRows x, const float* w, float eps, ConstRows dout,
                                         Rows dx, bool accumulate, float* partial) {
  const int64_t D = x.cols;
  float* part = partial ? partial + blockIdx.x * D : nullptr;
  for (int64_t r = blockIdx.x; r < x.rows; r += gridDim.x) {
    const float* v = x.p + r * x.stride;
    const float* g = dout.p + r * dout.stride;
    float ss = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < D; i += kThreads) {
      ss += v[i] * v[i];
      dot += v[i] * (w ? w[i] : 1.f) * g[i];
    }
    ss = block_sum(ss);
    dot = block_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(D) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(D);
    float* o = dx.p + r * dx.stride;
    for (int64_t i = threadIdx.x; i < D; i += kThreads) {
      const float d = rs * (w ? w[i] : 1.f) * g[i] - v[i] * k;
      o[i] = accumulate ? o[i] + d : d;
      if (part) part[i] += g[i] * v[i] * rs;
    }
  }
}

__global__ void gated_rms_norm_backward_kernel(ConstRows y, ConstRows z, const float* w, int64_t n,
                                               float eps, bool norm_before_gate, ConstRows dout,
                                               Rows dy, Rows dz, float* partial) {
  const int64_t D = y.cols, groups = D / n;
  float* part = partial ? partial + blockIdx.x * D : nullptr;
  for (int64_t u = blockIdx.x; u < y.rows * groups; u += gridDim.x) {
    const int64_t row = u / groups, g0 = (u % groups) * n;
    const float* yr = y.p + row * y.stride + g0;
    const float* zr = z.p + row * z.stride + g0;
    const float* go = dout.p + row * dout.stride + g0;
    float* dyr = dy.p + row * dy.stride + g0;
    float* dzr = dz.p + row * dz.stride + g0;
    if (!w) {  // out = y silu(z)
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const float zi = zr[i], yi = yr[i], gi = go[i];
        dyr[i] = gi * silu(zi);
        dzr[i] = gi * yi * silu_grad(zi);
      }
      continue;
    }
    const float* wg = w + g0;
    // v: the normalised input; gv: the gradient reaching the norm's output / w.
    float ss = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float v = norm_before_gate ? yr[i] : yr[i] * silu(zr[i]);
      const float gv = norm_before_gate ? go[i] * silu(zr[i]) : go[i];
      ss += v * v;
      dot += v * wg[i] * gv;
    }
    ss = block_sum(ss);
    dot = block_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(n) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(n);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float zi = zr[i], yi = yr[i], s = silu(zi);
      const float v = norm_before_gate ? yi : yi * s;
      const float gv = norm_before_gate ? go[i] * s : go[i];
      const float dv = rs * wg[i] * gv - v * k;
      if (norm_before_gate) {
        dyr[i] = dv;
        dzr[i] = go[i] * v * rs * wg[i] * silu_grad(zi);
      } else {
        dyr[i] = dv * s;
        dzr[i] = dv * yi * silu_grad(zi);
      }
      if (part) part[g0 + i] += gv * v * rs;
    }
  }
}

// Thread per column; the partial rows summed in order.
__global__ void column_sums_kernel(ConstRows src, float* dst) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= src.cols) return;
  float acc = 0;
  for (int64_t r = 0; r < src.rows; ++r) acc += src.p[r * src.stride + c];
  dst[c] += acc;
}

int grid_for(int64_t units) {
  return static_cast<int>(units < kPartialRows ? (units > 0 ? units : 1) : kPartialRows);
}

}  // namespace

void launch_column_sums(ConstRows src, float* dst, cudaStream_t s) {
  if (src.cols == 0) return;
  column_sums_kernel<<<static_cast<unsigned>((src.cols + kThreads - 1) / kThreads), kThreads, 0,
                       s>>>(src, dst);
}

// The partial rows a launch touches are the first grid_for(units) of them;
// the caller zeroes kPartialRows rows and sums them all (zeros add nothing).
void launch_rms_norm_backward(ConstRows x, const float* w, float eps, ConstRows dout, Rows dx,
                              bool accumulate_dx, float* partial, cudaStream_t s) {
  if (x.rows == 0) return;
  rms_norm_backward_kernel<<<grid_for(x.rows), kThreads, 0, s>>>(x, w, eps, dout, dx, accumulate_dx,
                                                                 partial);
}

void launch_gated_rms_norm_backward(ConstRows y, ConstRows z, const float* w, int64_t group,
                                    float eps, bool norm_before_gate, ConstRows dout, Rows dy,
                                    Rows dz, float* partial, cudaStream_t s) {
  if (y.rows == 0) return;
  const int64_t n = group ? group : y.cols;
  gated_rms_norm_backward_kernel<<<grid_for(y.rows * (y.cols / n)), kThreads, 0, s>>>(
      y, z, w, n, eps, norm_before_gate, dout, dy, dz, partial);
}

}  // namespace ssm::cuda
