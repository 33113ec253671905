// The kernels of launch_hybrid.h. The selective scan is the recurrence in
// F32, sequential in time: Mamba-1 gives every channel its own decays, so
// there is no matrix form to put on the tensor cores (docs/MATH.md §2b); a
// channel's N state entries are spread over S lanes of a warp (the same
// layout as the sequential ssd_scan) and summed with shuffles.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "ops/cuda/launch_hybrid.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float silu(float z) { return z / (1.f + expf(-z)); }
__device__ float softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 16));
}

__global__ void relu_squared_kernel(Rows t) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* p = t.p + (i / t.cols) * t.stride + i % t.cols;
    const float v = fmaxf(*p, 0.f);
    *p = v * v;
  }
}

__global__ void gelu_product_kernel(ConstRows gate, Rows t) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / t.cols, c = i % t.cols;
    const float g = gate.p[r * gate.stride + c];
    t.p[r * t.stride + c] *= 0.5f * g * (1.f + erff(g * 0.70710678118654752f));
  }
}

__global__ void embedding16_kernel(const void* ids, bool ids_i64, const void* table, bool bf16,
                                   Rows out, float scale) {
  const int64_t id = ids_i64 ? static_cast<const int64_t*>(ids)[blockIdx.x]
                             : static_cast<const int32_t*>(ids)[blockIdx.x];
  float* dst = out.p + blockIdx.x * out.stride;
  for (int64_t i = threadIdx.x; i < out.cols; i += blockDim.x) {
    const float v =
        bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[id * out.cols + i])
             : __half2float(static_cast<const __half*>(table)[id * out.cols + i]);
    dst[i] = scale * v;
  }
}

// Block: kThreads / S channels of one batch row; thread (channel, j) holds
// the state entries n = j, j + S, ... (PER of them) in registers.
template <int PER>
__global__ void selective_scan_kernel(SelectiveScanLaunch a, int S) {
  const int per_block = kThreads / S;
  const int64_t blocks_per_row = (a.D + per_block - 1) / per_block;
  const int64_t b = blockIdx.x / blocks_per_row;
  const int64_t d = (blockIdx.x % blocks_per_row) * per_block + threadIdx.x / S;
  const int j = threadIdx.x % S;
  const bool active = d < a.D;
  const int64_t dc = active ? d : a.D - 1;
  const int N = static_cast<int>(a.N);
  float st[PER], A[PER];
  float* state = a.state ? a.state + (b * a.D + dc) * a.N : nullptr;
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    const int n = j + S * e;
    st[e] = (n < N && state) ? state[n] : 0.f;
    A[e] = n < N ? -expf(a.A_log[dc * a.N + n]) : 0.f;
  }
  const float bias = a.dt_bias ? a.dt_bias[dc] : 0.f, Dd = a.Dskip ? a.Dskip[dc] : 0.f;
  for (int64_t t = 0; t < a.L; ++t) {
    const int64_t r = b * a.L + t;
    const float dt = softplus(a.dt_raw.p[r * a.dt_raw.stride + dc] + bias);
    const float u = a.x.p[r * a.x.stride + dc];
    const float* Bt = a.Bm.p + r * a.Bm.stride;
    const float* Ct = a.C.p + r * a.C.stride;
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j + S * e;
      if (n < N) {
        st[e] = expf(dt * A[e]) * st[e] + dt * u * Bt[n];
        acc += st[e] * Ct[n];
      }
    }
    for (int o = S / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o, S);
    if (active && j == 0) {
      float y = acc + Dd * u;
      if (a.z.p) y *= silu(a.z.p[r * a.z.stride + dc]);
      a.y.p[r * a.y.stride + dc] = y;
    }
  }
  if (state && active) {
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j + S * e;
      if (n < N) state[n] = st[e];
    }
  }
}

__global__ void gather_rows_kernel(ConstRows x, const int64_t* rows, int64_t div, Rows out) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    out.p[r * out.stride + c] = x.p[(rows[r] / div) * x.stride + c];
  }
}

__global__ void expert_activation_kernel(Rows h, int64_t F, bool gated) {
  const int64_t n = h.rows * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* row = h.p + (i / F) * h.stride;
    const int64_t c = i % F;
    if (gated) {
      row[c] = silu(row[c]) * row[c + F];
    } else {
      const float v = fmaxf(row[c], 0.f);
      row[c] = v * v;
    }
  }
}

__global__ void moe_combine_kernel(ConstRows ys, const int64_t* pos, ConstRows w, int64_t k,
                                   Rows out, bool accumulate) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / out.cols, c = i % out.cols;
    float acc = 0.f;
    for (int64_t j = 0; j < k; ++j)
      acc += (w.p ? w.p[t * w.stride + j] : 1.f) * ys.p[pos[t * k + j] * ys.stride + c];
    float* o = out.p + t * out.stride + c;
    *o = accumulate ? *o + acc : acc;
  }
}

}  // namespace

void launch_relu_squared(Rows t, cudaStream_t s) {
  if (t.rows * t.cols == 0) return;
  relu_squared_kernel<<<blocks_for(t.rows * t.cols), kThreads, 0, s>>>(t);
}

void launch_gelu_product(ConstRows gate, Rows t, cudaStream_t s) {
  if (t.rows * t.cols == 0) return;
  gelu_product_kernel<<<blocks_for(t.rows * t.cols), kThreads, 0, s>>>(gate, t);
}

void launch_embedding16(const void* ids, bool ids_i64, const void* table, bool bf16, Rows out,
                        float scale, cudaStream_t s) {
  if (out.rows == 0) return;
  embedding16_kernel<<<static_cast<unsigned>(out.rows), kThreads, 0, s>>>(ids, ids_i64, table, bf16,
                                                                          out, scale);
}

void launch_selective_scan(const SelectiveScanLaunch& a, cudaStream_t s) {
  if (a.B * a.D == 0) return;
  int S = 1;
  while (S < 32 && (a.N + S - 1) / S > 8) S *= 2;
  while (S < 32 && S < a.N && S < 4) S *= 2;  // a few lanes per channel even for small N
  const int64_t need = (a.N + S - 1) / S, per_block = kThreads / S;
  const unsigned grid = static_cast<unsigned>(a.B * ((a.D + per_block - 1) / per_block));
  if (need <= 1)
    selective_scan_kernel<1><<<grid, kThreads, 0, s>>>(a, S);
  else if (need <= 2)
    selective_scan_kernel<2><<<grid, kThreads, 0, s>>>(a, S);
  else if (need <= 4)
    selective_scan_kernel<4><<<grid, kThreads, 0, s>>>(a, S);
  else if (need <= 8)
    selective_scan_kernel<8><<<grid, kThreads, 0, s>>>(a, S);
  else if (need <= 16)
    selective_scan_kernel<16><<<grid, kThreads, 0, s>>>(a, S);
  else
    selective_scan_kernel<32><<<grid, kThreads, 0, s>>>(a, S);
}

void launch_gather_rows(ConstRows x, const int64_t* rows, int64_t div, Rows out, cudaStream_t s) {
  if (out.rows * out.cols == 0) return;
  gather_rows_kernel<<<blocks_for(out.rows * out.cols), kThreads, 0, s>>>(x, rows, div, out);
}

void launch_expert_activation(Rows h, int64_t F, bool gated, cudaStream_t s) {
  if (h.rows * F == 0) return;
  expert_activation_kernel<<<blocks_for(h.rows * F), kThreads, 0, s>>>(h, F, gated);
}

void launch_moe_combine(ConstRows ys, const int64_t* pos, ConstRows weights, int64_t k, Rows out,
                        bool accumulate, cudaStream_t s) {
  if (out.rows * out.cols == 0) return;
  moe_combine_kernel<<<blocks_for(out.rows * out.cols), kThreads, 0, s>>>(ys, pos, weights, k, out,
                                                                          accumulate);
}

}  // namespace ssm::cuda
