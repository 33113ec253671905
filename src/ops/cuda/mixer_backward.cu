// The backward of the causal convolution, of ssd_prepare and of the
// embedding lookup. Parameter gradients are summed in a fixed order
// (partial rows, or one thread per output walking its inputs in order).
#include "ops/cuda/launch_train.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoidf(float z) { return 1.f / (1.f + expf(-z)); }
__device__ float silu_grad(float z) {
  const float s = sigmoidf(z);
  return s * (1.f + z * (1.f - s));
}

// Thread per (row, c): the gradient before the activation (the convolution
// recomputed from a zero starting state).
__global__ void conv1d_dpre_kernel(Conv1dBackwardLaunch a) {
  const int64_t n = a.B * a.L * a.C;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / a.C, c = i % a.C, t = row % a.L;
    const float g = a.dout.p[row * a.dout.stride + c];
    if (!a.silu) {
      a.dpre[i] = g;
      continue;
    }
    float acc = a.bias ? a.bias[c] : 0.f;
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t s = t - a.K + 1 + k;
      if (s >= 0) acc += a.weight[c * a.K + k] * a.in.p[(row - a.K + 1 + k) * a.in.stride + c];
    }
    a.dpre[i] = g * silu_grad(acc);
  }
}

// Thread per (row, c): in[s] feeds out[s + K - 1 - k] through tap k.
__global__ void conv1d_din_kernel(Conv1dBackwardLaunch a) {
  const int64_t n = a.B * a.L * a.C;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / a.C, c = i % a.C, s = row % a.L;
    float acc = 0;
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t t = s + a.K - 1 - k;
      if (t < a.L) acc += a.weight[c * a.K + k] * a.dpre[(row + a.K - 1 - k) * a.C + c];
    }
    a.din.p[row * a.din.stride + c] = acc;
  }
}

// Block x: channels; block y: one of kPartialRows runs of rows. Each thread
// sums its channel's taps and bias over its run into its partial row.
__global__ void conv1d_dweight_kernel(Conv1dBackwardLaunch a) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= a.C) return;
  const int64_t rows = a.B * a.L, per = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
  float acc[18] = {};
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t t = row % a.L;
    const float d = a.dpre[row * a.C + c];
    for (int64_t k = 0; k < a.K; ++k)
      if (t - a.K + 1 + k >= 0) acc[k] += d * a.in.p[(row - a.K + 1 + k) * a.in.stride + c];
    acc[a.K] += d;
  }
  float* part = a.partial + blockIdx.y * a.C * (a.K + 1);
  for (int64_t k = 0; k < a.K; ++k) part[c * a.K + k] = acc[k];
  part[a.C * a.K + c] = acc[a.K];
}

// conv1d's whole backward in one pass for K <= 4 (the Mamba kernels'):
// block x: channels, block y: one of kPartialRows runs of rows. A thread
// walks its channel down its run (and K - 1 rows past it) with the last
// K - 1 inputs and the last K pre-activation gradients in registers: each
// row's gradient before the activation, din of the row K - 1 back, and the
// taps' and bias's sums into its partial row. The three kernels above each
// read the rows again (2048 x 1792 channels: 36, 32 and 41 us on an H100 for
// about 15 us of traffic together), and dpre went through memory.
template <int K>
__global__ void conv1d_backward_rows_kernel(Conv1dBackwardLaunch a) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= a.C) return;
  const int64_t rows = a.B * a.L, per = (rows + gridDim.y - 1) / gridDim.y;
  int64_t r0 = blockIdx.y * per;
  if (r0 > rows) r0 = rows;
  const int64_t r1 = r0 + per < rows ? r0 + per : rows;
  float w[K], acc[K + 1] = {};
  for (int k = 0; k < K; ++k) w[k] = a.weight[c * K + k];
  const float bias = a.bias ? a.bias[c] : 0.f;
  // xp[j]: in of row - (K - 1) + j (0 before the sequence); dp[j], ts[j]: the
  // pre-activation gradient (0 past the rows) and the position of row - (K - 1) + j.
  float xp[K] = {}, dp[K] = {};
  int64_t ts[K] = {};
  int64_t t = r0 < rows ? r0 % a.L : 0;
  for (int j = 0; j + 1 < K; ++j) {
    const int64_t back = K - 1 - j;
    if (t - back >= 0) xp[j] = a.in.p[(r0 - back) * a.in.stride + c];
  }
  for (int64_t row = r0; row < r1 + K - 1; ++row) {
    float d = 0.f;
    if (row < rows) {
      if (t == 0)
        for (int j = 0; j + 1 < K; ++j) xp[j] = 0.f;  // a new sequence
      const float x = a.in.p[row * a.in.stride + c];
      xp[K - 1] = x;
      d = a.dout.p[row * a.dout.stride + c];
      if (a.silu) {
        float pre = bias;
        for (int k = 0; k < K; ++k) pre += w[k] * xp[k];
        d *= silu_grad(pre);
      }
      if (row < r1) {
        for (int k = 0; k < K; ++k) acc[k] += d * xp[k];
        acc[K] += d;
      }
      for (int j = 0; j + 1 < K; ++j) xp[j] = xp[j + 1];
    }
    for (int j = 0; j + 1 < K; ++j) {
      dp[j] = dp[j + 1];
      ts[j] = ts[j + 1];
    }
    dp[K - 1] = d;
    ts[K - 1] = t;
    // din of s = row - (K - 1): in[s] feeds out[s + K - 1 - k] through tap k
    // while that is in s's sequence.
    const int64_t s = row - (K - 1);
    if (s >= r0) {
      float g = 0;
      for (int k = 0; k < K; ++k)
        if (ts[0] + K - 1 - k < a.L) g += w[k] * dp[K - 1 - k];
      a.din.p[s * a.din.stride + c] = g;
    }
    if (++t == a.L) t = 0;
  }
  if (a.partial) {
    float* part = a.partial + blockIdx.y * a.C * (K + 1);
    for (int k = 0; k < K; ++k) part[c * K + k] = acc[k];
    part[a.C * K + c] = acc[K];
  }
}

__device__ float softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

__global__ void ssd_prepare_backward_kernel(ConstRows dt_raw, const float* dt_bias, float dt_min,
                                            float dt_max, ConstRows ddt, Rows ddt_raw) {
  const int64_t H = dt_raw.cols, n = dt_raw.rows * H;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / H, h = i % H;
    const float raw = dt_raw.p[r * dt_raw.stride + h] + dt_bias[h];
    const float sp = softplus(raw);
    const bool passes = sp >= dt_min && sp <= dt_max;
    ddt_raw.p[r * ddt_raw.stride + h] = passes ? ddt.p[r * ddt.stride + h] * sigmoidf(raw) : 0.f;
  }
}

// Block per head: the bias gradient summed over rows (a fixed tree), and dA_log.
__global__ void ssd_prepare_params_kernel(ConstRows ddt_raw, const float* A_log, const float* dA,
                                          float* ddt_bias, float* dA_log) {
  __shared__ float part[kThreads];
  const int64_t h = blockIdx.x;
  float acc = 0;
  for (int64_t r = threadIdx.x; r < ddt_raw.rows; r += kThreads)
    acc += ddt_raw.p[r * ddt_raw.stride + h];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int o = kThreads / 2; o > 0; o /= 2) {
    if (threadIdx.x < o) part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (ddt_bias) ddt_bias[h] += part[0];
    if (dA_log) dA_log[h] += dA[h] * -expf(A_log[h]);  // dA/dA_log = A
  }
}

// Block per run of equal ids, threads over columns; rows added in order.
// A block a run, striding over the runs (their number is on the device):
// each run's rows are added in order by one block, as when the grid had a
// block a run.
__global__ void embedding_backward_kernel(const int64_t* order, const int64_t* seg,
                                          const int64_t* seg_id, const int64_t* runs,
                                          ConstRows dout, float scale, float* dtable, int64_t D) {
  const int64_t n = *runs;
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    float* to = dtable + seg_id[j] * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = to[d];
      for (int64_t i = seg[j]; i < seg[j + 1]; ++i) acc += scale * dout.p[order[i] * dout.stride + d];
      to[d] = acc;
    }
  }
}

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

void launch_conv1d_backward(const Conv1dBackwardLaunch& a, cudaStream_t s) {
  const int64_t n = a.B * a.L * a.C;
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>((a.C + kThreads - 1) / kThreads), kPartialRows);
  static_assert(kConv1dOnePassTaps == 4, "the cases below");
  switch (a.K) {
    case 1: conv1d_backward_rows_kernel<1><<<grid, kThreads, 0, s>>>(a); return;
    case 2: conv1d_backward_rows_kernel<2><<<grid, kThreads, 0, s>>>(a); return;
    case 3: conv1d_backward_rows_kernel<3><<<grid, kThreads, 0, s>>>(a); return;
    case 4: conv1d_backward_rows_kernel<4><<<grid, kThreads, 0, s>>>(a); return;
    default: break;
  }
  conv1d_dpre_kernel<<<blocks_for(n), kThreads, 0, s>>>(a);
  conv1d_din_kernel<<<blocks_for(n), kThreads, 0, s>>>(a);
  if (a.partial) conv1d_dweight_kernel<<<grid, kThreads, 0, s>>>(a);
}

void launch_ssd_prepare_backward(ConstRows dt_raw, const float* dt_bias, const float* A_log,
                                 float dt_min, float dt_max, ConstRows ddt, const float* dA,
                                 Rows ddt_raw, float* ddt_bias, float* dA_log, cudaStream_t s) {
  if (dt_raw.rows * dt_raw.cols > 0)
    ssd_prepare_backward_kernel<<<blocks_for(dt_raw.rows * dt_raw.cols), kThreads, 0, s>>>(
        dt_raw, dt_bias, dt_min, dt_max, ddt, ddt_raw);
  if ((ddt_bias || dA_log) && dt_raw.cols > 0)
    ssd_prepare_params_kernel<<<static_cast<unsigned>(dt_raw.cols), kThreads, 0, s>>>(
        ConstRows{ddt_raw.p, ddt_raw.rows, ddt_raw.cols, ddt_raw.stride}, A_log, dA, ddt_bias,
        dA_log);
}

void launch_embedding_backward(const int64_t* meta, int64_t rows, ConstRows dout, float scale,
                               float* dtable, int64_t D, cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const int64_t blocks = rows < 65535 ? rows : 65535;
  embedding_backward_kernel<<<static_cast<unsigned>(blocks), 128, 0, s>>>(
      meta, meta + rows, meta + 2 * rows + 1, meta + 3 * rows + 1, dout, scale, dtable, D);
}

}  // namespace ssm::cuda
