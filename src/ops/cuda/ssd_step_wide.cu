// The Mamba-2 decode step for many sequences (launch_ssd_step where
// ssd_step_streams): two launches instead of ssd_step_kernel's one. At
// batch 64 the step streams the state (25 MB each way a layer of the 130m
// model in BF16), and ssd_step_kernel's wide blocks spent their time on
// what each block does once around it (the B and C channels' convolution,
// the count-in atomic, the last block's shift of the convolution state,
// barriers) with 118-128 registers a thread and two blocks a multiprocessor:
// 0.88 TB/s on an H100 (docs/CUDA.md). Here a first small launch does the
// sequence's convolution step, dt and exp(dt A) once and writes them to
// a.rows; the second only streams the state: no shared memory, no barrier,
// no atomic, each thread 16 bytes of state a row, loaded before the wait.
// Both compute as ssd_step_kernel does (state_step_math.h), so a sequence
// gets the same bits at any batch.
#include <cstdint>

#include <cuda_bf16.h>

#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/state_step_math.h"
#include "ops/cuda/state_memory.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

// A row of a.rows: [B of the G groups | their C | x (H P) | dt (H) |
// exp(dt A) (H)], B and C first so that a thread's 8 entries of them are
// 16-byte aligned (N is a multiple of 8), the row padded to 4 floats.
struct RowLayout {
  int GN, HP, H, floats;
  __host__ __device__ explicit RowLayout(const SsdStepLaunch& a)
      : GN(static_cast<int>(a.G * a.N)),
        HP(static_cast<int>(a.H * a.P)),
        H(static_cast<int>(a.H)),
        floats((2 * GN + HP + 2 * H + 3) / 4 * 4) {}
  // Where in-row channel c (x, then B, then C: xbc's order) goes.
  __host__ __device__ int channel(int c) const { return c < HP ? 2 * GN + c : c - HP; }
  __host__ __device__ int x() const { return 2 * GN; }
  __host__ __device__ int dt() const { return 2 * GN + HP; }
  __host__ __device__ int decay() const { return 2 * GN + HP + H; }
};

// Thread per (sequence, channel of xbc or head): the channel's convolution
// step as ssd_step_kernel sums it (bias, the state's taps oldest first, the
// new input's), silu, and its convolution state shifted by one; a head's
// dt and exp(dt A). The state's taps and the parameters are read (and the
// taps shifted) before the wait: only this kernel, in an earlier step,
// wrote them (overlap_launch.h).
__global__ void __launch_bounds__(kThreads) ssd_step_inputs_kernel(SsdStepLaunch a) {
  let_next_kernel_start();
  const RowLayout rows(a);
  const int C = rows.HP + 2 * rows.GN, width = C + rows.H;
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= a.B * width) return;
  const int64_t b = i / width;
  const int c = static_cast<int>(i % width), K = static_cast<int>(a.K), W = K - 1;
  float* row = a.rows + b * rows.floats;
  const float* in = a.xbc.p + b * a.xbc.stride;
  if (c < C) {
    float* cst = a.conv_state + b * W * C + c;  // cst[s * C], s < W
    float acc = a.conv_bias ? a.conv_bias[c] : 0.f;
    for (int k = 0; k < W; ++k) {
      const float v = cst[k * C];
      acc = conv_tap(acc, a.conv_weight[c * K + k], v);
      if (k > 0) cst[(k - 1) * C] = v;
    }
    wait_for_previous_kernel();
    const float v = in[c];
    if (W > 0) cst[(W - 1) * C] = v;
    row[rows.channel(c)] = silu(conv_tap(acc, a.conv_weight[c * K + W], v));
  } else {
    const int h = c - C;
    const float dt_bias = a.dt_bias[h], A = -expf(a.A_log[h]);
    wait_for_previous_kernel();
    const float dt = step_dt(a.dt_raw.p[b * a.dt_raw.stride + h], dt_bias, a.dt_min, a.dt_max);
    row[rows.dt() + h] = dt;
    row[rows.decay() + h] = expf(dt * A);
  }
}

// Block of kThreads per (b, h, block of rows): S threads a state row (S =
// ssd_slices(N), lane j owning entries 8j to 8j + 7: state_step_math.h's
// order), kThreads / S rows side by side, each thread RPT of them (rows pl,
// pl + kThreads / S, ...: a warp's loads are whole adjacent rows). RPT is
// 4 for BF16, 2 for F32: 64 bytes of state a thread in flight across the
// wait, 16 KB a block, in 16 or 32 registers.
template <class T, int RPT>
__global__ void __launch_bounds__(kThreads, 4) ssd_state_step_kernel(SsdStepLaunch a, int S, int row_blocks) {
  // The state is loaded before the wait: only this kernel, in an earlier
  // step, writes it (as in ssd_step_kernel).
  let_next_kernel_start();
  const RowLayout rows(a);
  const int N = static_cast<int>(a.N), P = static_cast<int>(a.P), slots = kThreads / S;
  const int t = static_cast<int>(threadIdx.x), pl = t / S, j = t % S, n0 = 8 * j;
  const int64_t bh = blockIdx.x / row_blocks;
  const int p1 = static_cast<int>(blockIdx.x % row_blocks) * slots * RPT + pl;  // the thread's first row
  const int64_t b = bh / a.H;
  const int h = static_cast<int>(bh % a.H), g = h / static_cast<int>(a.H / a.G);
  const bool owns = n0 < N;  // lanes past N (N < 8 S) hold zeros
  T* state = static_cast<T*>(a.state.p) + (bh * P + p1) * N + n0;
  Piece<T> st[RPT] = {};
#pragma unroll
  for (int r = 0; r < RPT; ++r)
    if (owns && p1 + r * slots < P) st[r] = load_piece(state + r * slots * N);
  const float Dh = a.D ? a.D[h] : 0.f;
  wait_for_previous_kernel();
  const float* row = a.rows + b * rows.floats;
  const float dt = row[rows.dt() + h], decay = row[rows.decay() + h];
  float Bn[8] = {}, Cn[8] = {};
  if (owns) {
    const float* src = row + g * N + n0;
#pragma unroll
    for (int k = 0; k < 8; k += 4) {
      const float4 bv = *reinterpret_cast<const float4*>(src + k);
      const float4 cv = *reinterpret_cast<const float4*>(src + rows.GN + k);
      Bn[k] = bv.x, Bn[k + 1] = bv.y, Bn[k + 2] = bv.z, Bn[k + 3] = bv.w;
      Cn[k] = cv.x, Cn[k + 1] = cv.y, Cn[k + 2] = cv.z, Cn[k + 3] = cv.w;
    }
  }
  const float* x = row + rows.x() + h * P;
  float* out = a.out.p + b * a.out.stride + h * P;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int p = p1 + r * slots;
    const bool here = p < P;
    const float xv = here ? x[p] : 0.f, coef = dt * xv;
    float e[8];
    unpack(st[r], e);
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      e[k] = step_entry(e[k], decay, coef, Bn[k]);
      acc = y_term(acc, e[k], Cn[k]);
    }
    // Every thread of the block is here (kThreads is whole warps).
    for (int o = S / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o, S);
    if (here) {
      if (owns) store_piece(state + r * slots * N, e);
      if (j == 0) out[p] = y_out(acc, Dh, xv);
    }
  }
}

template <class T, int RPT>
void launch_state_step(const SsdStepLaunch& a, int S, cudaStream_t s) {
  const int64_t rows_a_block = kThreads / S * RPT;
  const int row_blocks = static_cast<int>((a.P + rows_a_block - 1) / rows_a_block);
  const dim3 grid(static_cast<unsigned>(a.B * a.H * row_blocks));
  launch_overlapped(a.overlap, ssd_state_step_kernel<T, RPT>, grid, dim3(kThreads), 0, s, a, S, row_blocks);
}

}  // namespace

int64_t ssd_step_row_floats(const SsdStepLaunch& a) { return RowLayout(a).floats; }

void launch_ssd_step_wide(const SsdStepLaunch& a, cudaStream_t s) {
  const RowLayout rows(a);
  const int64_t threads = a.B * (rows.HP + 2 * rows.GN + rows.H);
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  launch_overlapped(a.overlap, ssd_step_inputs_kernel, grid, dim3(kThreads), 0, s, a);
  // As ssd_slices (conv_ssd.cu): the fewest threads a row, a power of two,
  // with at most 8 entries each (N <= 256 here).
  int S = 1;
  while (8 * S < a.N) S *= 2;
  if (a.state.bf16) launch_state_step<__nv_bfloat16, 4>(a, S, s);
  else launch_state_step<float, 2>(a, S, s);
}

}  // namespace ssm::cuda
