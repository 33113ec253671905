// The Mamba-2 mixer's own kernels: the causal depthwise convolution (with
// its decode state), dt and A (ssd_prepare) and the selective scan.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/state_step_math.h"
#include "ops/cuda/state_memory.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTaps = 17;  // K - 1 <= 16 state rows kept in registers

// Block (256 channels, strip of kConvStrip steps of one sequence); each
// thread walks its channel through the strip's steps in order, so an input
// is read from memory once and kept (in registers when the taps are known
// at compile time, KT > 0; else in L1) for the next K - 1 outputs. A thread
// per output instead (the first version) read every input K times through
// L2 and took 0.38 ms at 8 x 2048 x 1792 (H100), five times its bound.
// Steps before t = 0 come from the state (zeros without one). The sum's
// order is the definition's: bias, then the taps oldest first.
constexpr int kConvStrip = 32;
constexpr int kConvAhead = 4;  // loads issued before the first of their sums

template <int KT>
__global__ void __launch_bounds__(kThreads) conv1d_kernel(Conv1dLaunch a, int64_t strips) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= a.C) return;  // no barriers below
  const int64_t K = KT > 0 ? KT : a.K, L = a.L;
  const float bias = a.bias ? a.bias[c] : 0.f;
  const float* w = a.weight + c * K;
  for (int64_t bs = blockIdx.y; bs < a.B * strips; bs += gridDim.y) {
    const int64_t b = bs / strips, t0 = (bs % strips) * kConvStrip, t1 = min(L, t0 + kConvStrip);
    const float* in = a.in.p + b * L * a.in.stride + c;
    const float* st = a.state ? a.state + (b * (K - 1) + K - 1) * a.C + c : nullptr;  // st[s * C], s < 0
    float* out = a.out.p + b * L * a.out.stride + c;
    const auto input = [&](int64_t s) { return s >= 0 ? in[s * a.in.stride] : (st ? st[s * a.C] : 0.f); };
    if constexpr (KT > 0) {
      float wk[KT], win[KT];  // win[k]: the input at t - KT + 1 + k
#pragma unroll
      for (int k = 0; k < KT; ++k) wk[k] = w[k];
#pragma unroll
      for (int k = 0; k + 1 < KT; ++k) win[k] = input(t0 - KT + 1 + k);
      for (int64_t t = t0; t < t1; t += kConvAhead) {
        float next[kConvAhead];
#pragma unroll
        for (int j = 0; j < kConvAhead; ++j) next[j] = t + j < t1 ? in[(t + j) * a.in.stride] : 0.f;
#pragma unroll
        for (int j = 0; j < kConvAhead; ++j) {
          if (t + j >= t1) break;
          win[KT - 1] = next[j];
          float acc = bias;
#pragma unroll
          for (int k = 0; k < KT; ++k) acc += wk[k] * win[k];
          out[(t + j) * a.out.stride] = a.silu ? silu(acc) : acc;
#pragma unroll
          for (int k = 0; k + 1 < KT; ++k) win[k] = win[k + 1];
        }
      }
    } else {
      for (int64_t t = t0; t < t1; ++t) {
        float acc = bias;
        for (int64_t k = 0; k < K; ++k) acc += w[k] * input(t - K + 1 + k);
        out[t * a.out.stride] = a.silu ? silu(acc) : acc;
      }
    }
  }
}

// Thread per (b, c): the last K-1 inputs of (old state, sequence), all read
// before any is written.
__global__ void conv1d_state_kernel(Conv1dLaunch a) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= a.B * a.C) return;
  const int64_t b = i / a.C, c = i % a.C, W = a.K - 1;
  float next[kMaxTaps];
  for (int64_t s = 0; s < W; ++s) {
    const int64_t t = a.L - W + s;
    next[s] = t >= 0 ? a.in.p[(b * a.L + t) * a.in.stride + c] : a.state[(b * W + t + W) * a.C + c];
  }
  for (int64_t s = 0; s < W; ++s) a.state[(b * W + s) * a.C + c] = next[s];
}

// A decode step (L = 1, with a state): thread per (b, c), the output from
// the state's K-1 inputs and the new one, then the state shifted by one; one
// launch instead of two.
__global__ void conv1d_step_kernel(Conv1dLaunch a) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= a.B * a.C) return;
  const int64_t b = i / a.C, c = i % a.C, W = a.K - 1;
  float* st = a.state + b * W * a.C + c;  // st[s * C], s < W
  const float in = a.in.p[b * a.in.stride + c];
  float acc = a.bias ? a.bias[c] : 0.f;
  for (int64_t k = 0; k < W; ++k) {
    const float v = st[k * a.C];
    acc += a.weight[c * a.K + k] * v;
    if (k > 0) st[(k - 1) * a.C] = v;
  }
  acc += a.weight[c * a.K + W] * in;
  if (W > 0) st[(W - 1) * a.C] = in;
  a.out.p[b * a.out.stride + c] = a.silu ? silu(acc) : acc;
}

__global__ void ssd_prepare_kernel(ConstRows dt_raw, const float* dt_bias, const float* A_log, float dt_min,
                                   float dt_max, Rows dt, float* A) {
  const int64_t H = dt_raw.cols, n = dt_raw.rows * H;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / H, h = i % H;
    const float sp = softplus(dt_raw.p[r * dt_raw.stride + h] + dt_bias[h]);
    dt.p[r * dt.stride + h] = fminf(fmaxf(sp, dt_min), dt_max);
    if (r == 0) A[h] = -expf(A_log[h]);
  }
}

// Block per (b, h, block of kRowsPerBlock state rows p); thread (p, j)
// keeps the PER adjacent state entries n = j PER + k of row p in registers
// (S = slices, a power of two <= 32, so the S threads of a row are lanes
// of one warp and sum y_t[p] with shuffles: state_step_math.h's order, the
// decode step's). Time runs in order inside the block
// (the sequential definition, in F32, for prefill and the L = 1 decode step
// alike); B_t, C_t, x_t and exp(dt_t A) of `stage` steps at a time are first
// copied to shared memory, so the steps themselves wait on no global memory.
// PER is a template parameter so that the state stays in registers; T is
// the state's element type (float, or __nv_bfloat16 widened and rounded by
// state_memory.h).
constexpr int kRowsPerBlock = 16;

template <int PER, class T>
__global__ void ssd_scan_kernel(SsdScanLaunch a, int S, int stage) {
  extern __shared__ float smem[];
  const int N = static_cast<int>(a.N);
  const int64_t row_blocks = (a.P + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t bh = blockIdx.x / row_blocks, p0 = (blockIdx.x % row_blocks) * kRowsPerBlock;
  const int64_t b = bh / a.H, h = bh % a.H, g = h / (a.H / a.G);
  const int rows_here = static_cast<int>(min(int64_t{kRowsPerBlock}, a.P - p0));
  float* sB = smem;                          // stage x N
  float* sC = sB + stage * N;                // stage x N
  float* sx = sC + stage * N;                // stage x kRowsPerBlock
  float* sdt = sx + stage * kRowsPerBlock;   // stage: dt
  float* sdecay = sdt + stage;               // stage: exp(dt A)
  const int pl = threadIdx.x / S, j = threadIdx.x % S;
  const bool active = pl < rows_here;
  const int pr = active ? pl : 0;
  const int64_t p = p0 + pr;
  const int warp_base = (threadIdx.x / 32) * 32;
  const int in_warp = min(32, static_cast<int>(blockDim.x) - warp_base);
  const unsigned mask = in_warp == 32 ? 0xffffffffu : ((1u << in_warp) - 1u);
  float st[PER];
  T* state = a.state.p ? static_cast<T*>(a.state.p) + ((b * a.H + h) * a.P + p) * a.N : nullptr;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int n = j * PER + k;
    st[k] = (n < N && state) ? load_state<false>(state + n) : 0.f;
  }
  const float A = a.A[h], Dh = a.D ? a.D[h] : 0.f;
  const float* __restrict__ Bsrc = a.Bm.p + g * a.N;
  const float* __restrict__ Csrc = a.C.p + g * a.N;
  const float* __restrict__ xsrc = a.x.p + h * a.P + p0;
  for (int64_t t0 = 0; t0 < a.L; t0 += stage) {
    const int steps = static_cast<int>(min(int64_t{stage}, a.L - t0));
    const int64_t row0 = b * a.L + t0;
    // Nested loops, not one flat index: no divisions.
    for (int tt = 0; tt < steps; ++tt) {
      const int64_t r = row0 + tt;
      for (int n = threadIdx.x; n < N; n += blockDim.x) {
        sB[tt * N + n] = Bsrc[r * a.Bm.stride + n];
        sC[tt * N + n] = Csrc[r * a.C.stride + n];
      }
      for (int q = threadIdx.x; q < rows_here; q += blockDim.x) sx[tt * kRowsPerBlock + q] = xsrc[r * a.x.stride + q];
    }
    for (int tt = threadIdx.x; tt < steps; tt += blockDim.x) {
      const float dt = a.dt.p[(row0 + tt) * a.dt.stride + h];
      sdt[tt] = dt;
      sdecay[tt] = expf(dt * A);
    }
    __syncthreads();
    for (int tt = 0; tt < steps; ++tt) {
      const float xv = sx[tt * kRowsPerBlock + pr], decay = sdecay[tt], coef = sdt[tt] * xv;
      const float* Bt = sB + tt * N;
      const float* Ct = sC + tt * N;
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int n = j * PER + k;
        if (n < N) {
          st[k] = step_entry(st[k], decay, coef, Bt[n]);
          acc = y_term(acc, st[k], Ct[n]);
        }
      }
      for (int o = S / 2; o > 0; o /= 2) acc += __shfl_xor_sync(mask, acc, o, S);
      if (active && j == 0) a.y.p[(row0 + tt) * a.y.stride + h * a.P + p] = y_out(acc, Dh, xv);
    }
    __syncthreads();
  }
  if (state && active) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int n = j * PER + k;
      if (n < N) store_state<false>(state + n, st[k]);
    }
  }
}

// The first launch of ssd_step: block per (b, h, block of ROWS x
// kRowsPerBlock state rows), threads as in ssd_scan_kernel; thread (p, j)
// keeps row p, p + kRowsPerBlock, ... of the block (ROWS rows, each summed
// as one row of ssd_scan_kernel, so the same bits for every ROWS). Each
// block convolves what it reads: its own x channels (and shifts their
// convolution state: no other block reads them) and its group's B and C
// channels, whose state other blocks read too: the sequence's blocks count
// themselves in once they have read it (a.counters[b]), and the last one
// shifts it and puts the counter back to zero. (The second launch shifted
// it before, a single block at batch 1.) dt and exp(dt A) of the head, then
// one step of the recurrence; y + D x goes to out, normalised by the second
// launch when gated.
// PER <= 16 (N <= 512; ssd_step_ops.cpp sends larger states to the four
// ops): PER = 32 took 168 registers a thread, more than a 512-thread block
// has, and a bound that fits it costs the common sizes registers (47 at
// PER = 8 unbounded, 80 bounded).
// ROWS = 4 (launch_ssd_step: many sequences): at batch 64 the step streams
// 50 MB of state a layer, and a block of 16 rows spent its time on what
// every block does once (the B and C channels' convolution, dt, the
// counter) around 8 KB of it; 64 rows a block carry 32 KB of state loads in
// flight and pay that a quarter as often. The state is streamed there
// (state_memory.h); one sequence's 96 blocks at batch 1 keep plain loads.
// Since ssd_step_wide.cu, many sequences take these wide blocks only where
// its 16-byte pieces do not fit (N not a multiple of 8) or with
// SSM_CUDA_STATE_STREAM=0.
// T: the state's element type, as in ssd_scan_kernel.
constexpr int kHeldTaps = 4;  // convolutions of up to 5 taps

template <int PER, int ROWS, class T>
__global__ void ssd_step_kernel(SsdStepLaunch a, int S) {
  // Launched to overlap the in projection's tail (a.overlap). Before the
  // wait it reads the parameters and what only this kernel wrote, in an
  // earlier step: the layer's state rows and convolution state. (Nothing
  // else touches them within a step, and a step's kernels run after the
  // previous step's have finished: the ids' copy or the graph's replay
  // orders them.) So the state's loads, most of the kernel's bytes, are in
  // flight while the in projection ends; at batch 64 they are issued first
  // thing in every block, not after the convolution's.
  let_next_kernel_start();
  extern __shared__ float smem[];
  constexpr int kRows = ROWS * kRowsPerBlock;
  constexpr bool kStream = ROWS > 1;
  // Channel indices in 32 bits (a row of conv channels is far below 2^31):
  // what lives across the wait is kept to the state, two partial sums and
  // three scalars, so a block's registers stay near what they were.
  const int N = static_cast<int>(a.N), P = static_cast<int>(a.P);
  const int row_blocks = (P + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x / row_blocks;
  const int p0 = static_cast<int>(blockIdx.x % row_blocks) * kRows;
  const int64_t b = bh / a.H;
  const int h = static_cast<int>(bh % a.H), g = h / static_cast<int>(a.H / a.G);
  const int rows_here = min(kRows, P - p0);
  const int HP = static_cast<int>(a.H) * P, C = HP + 2 * static_cast<int>(a.G) * N;
  const int K = static_cast<int>(a.K), W = K - 1;
  float* sBC = smem;                        // 2N: B then C of the group
  float* sx = sBC + 2 * N;                  // kRows
  float* sstep = sx + kRows;                // dt, exp(dt A)
  float* cst = a.conv_state + b * W * C;    // cst[s * C + c], s < W
  const int t = static_cast<int>(threadIdx.x), pl = t / S, j = t % S;
  // Row r of the thread: pl + r kRowsPerBlock, or row 0 past the block's
  // rows (read, summed and not written).
  const auto row = [&](int r) { return pl + r * kRowsPerBlock < rows_here ? pl + r * kRowsPerBlock : 0; };
  T* state = static_cast<T*>(a.state.p) + (bh * P + p0) * N;
  float st[ROWS][PER];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int n = j * PER + k;
      st[r][k] = n < N ? load_state<kStream>(state + row(r) * N + n) : 0.f;
    }
  }
  // The convolutions' sums over the state's taps, in the order of the
  // whole sum (bias, taps oldest first, then the new input's tap). A
  // thread's B or C channel where the block has a thread for each (2N <=
  // blockDim.x: every state row of P >= 16 has its S threads); else they
  // are summed in a loop after the wait. x channels: rows_here <=
  // blockDim.x (launch_ssd_step), one a thread at most.
  const auto bc_of = [&](int i) { return HP + (i < N ? g * N : static_cast<int>(a.G) * N + g * N - N) + i; };
  const bool bc_hoisted = 2 * N <= static_cast<int>(blockDim.x);
  const int bc_channel = bc_hoisted && t < 2 * N ? bc_of(t) : -1;
  const int x_channel = t < rows_here ? h * P + p0 + t : -1;
  // A B or C channel's taps stay in registers for the conv state's shift
  // (held: one group, a thread a channel, W <= kHeldTaps), so the last
  // block's shift stores without loading them again at the kernel's tail.
  const bool held = bc_hoisted && a.G == 1 && W <= kHeldTaps;
  float taps[kHeldTaps] = {}, bc_in = 0.f;
  float bc_acc = 0.f, x_acc = 0.f;
  if (bc_channel >= 0) {
    bc_acc = a.conv_bias ? a.conv_bias[bc_channel] : 0.f;
    for (int k = 0; k < W; ++k) {
      const float v = cst[k * C + bc_channel];
#pragma unroll
      for (int i = 0; i < kHeldTaps; ++i)
        if (i == k) taps[i] = v;
      bc_acc = conv_tap(bc_acc, a.conv_weight[bc_channel * K + k], v);
    }
  }
  if (x_channel >= 0) {
    x_acc = a.conv_bias ? a.conv_bias[x_channel] : 0.f;
    for (int k = 0; k < W; ++k) {
      const float v = cst[k * C + x_channel];
      x_acc = conv_tap(x_acc, a.conv_weight[x_channel * K + k], v);
      if (k > 0) cst[(k - 1) * C + x_channel] = v;
    }
  }
  const float dt_bias = a.dt_bias[h], A = -expf(a.A_log[h]), Dh = a.D ? a.D[h] : 0.f;
  wait_for_previous_kernel();
  const float* in = a.xbc.p + b * a.xbc.stride;
  if (bc_channel >= 0) {
    bc_in = in[bc_channel];
    sBC[t] = silu(conv_tap(bc_acc, a.conv_weight[bc_channel * K + W], bc_in));
  }
  for (int i = bc_hoisted ? 2 * N : t; i < 2 * N; i += blockDim.x) {
    const int c = bc_of(i);
    float acc = a.conv_bias ? a.conv_bias[c] : 0.f;
    for (int k = 0; k < W; ++k) acc = conv_tap(acc, a.conv_weight[c * K + k], cst[k * C + c]);
    sBC[i] = silu(conv_tap(acc, a.conv_weight[c * K + W], in[c]));
  }
  if (x_channel >= 0) {
    const float v = in[x_channel];
    if (W > 0) cst[(W - 1) * C + x_channel] = v;
    sx[t] = silu(conv_tap(x_acc, a.conv_weight[x_channel * K + W], v));
  }
  if (t == 0) {
    const float dt = step_dt(a.dt_raw.p[b * a.dt_raw.stride + h], dt_bias, a.dt_min, a.dt_max);
    sstep[0] = dt;
    sstep[1] = expf(dt * A);
  }
  __syncthreads();  // every read of the B and C channels' convolution state is done
  __shared__ unsigned last_of_sequence;
  if (t == 0) last_of_sequence = arrive_acq_rel(a.counters + b) + 1u == static_cast<unsigned>(a.H * row_blocks);
  const int warp_base = (t / 32) * 32;
  const int in_warp = min(32, static_cast<int>(blockDim.x) - warp_base);
  const unsigned mask = in_warp == 32 ? 0xffffffffu : ((1u << in_warp) - 1u);
  const float decay = sstep[1];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int pr = row(r);
    const float xv = sx[pr], coef = sstep[0] * xv;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int n = j * PER + k;
      if (n < N) {
        st[r][k] = step_entry(st[r][k], decay, coef, sBC[n]);
        acc = y_term(acc, st[r][k], sBC[N + n]);
      }
    }
    for (int o = S / 2; o > 0; o /= 2) acc += __shfl_xor_sync(mask, acc, o, S);
    if (pl + r * kRowsPerBlock < rows_here) {
      if (j == 0) a.out.p[b * a.out.stride + h * P + p0 + pr] = y_out(acc, Dh, xv);
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int n = j * PER + k;
        if (n < N) store_state<kStream>(state + pr * N + n, st[r][k]);
      }
    }
  }
  __syncthreads();  // last_of_sequence, written before the step, is seen by all
  if (last_of_sequence && W > 0 && held) {
    if (bc_channel >= 0) {
#pragma unroll
      for (int i = 1; i < kHeldTaps; ++i)
        if (i < W) cst[(i - 1) * C + bc_channel] = taps[i];
      cst[(W - 1) * C + bc_channel] = bc_in;
    }
  } else if (last_of_sequence && W > 0) {
    for (int64_t c = HP + threadIdx.x; c < C; c += blockDim.x) {
      for (int64_t k = 1; k < W; ++k) cst[(k - 1) * C + c] = cst[k * C + c];
      cst[(W - 1) * C + c] = in[c];
    }
  }
  if (last_of_sequence && threadIdx.x == 0) a.counters[b] = 0;
}

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

void launch_conv1d(const Conv1dLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.C == 0) return;
  if (a.L == 1 && a.state) {
    conv1d_step_kernel<<<blocks_for(a.B * a.C), kThreads, 0, s>>>(a);
    return;
  }
  const int64_t strips = (a.L + kConvStrip - 1) / kConvStrip, work = a.B * strips;
  const dim3 grid(static_cast<unsigned>((a.C + kThreads - 1) / kThreads),
                  static_cast<unsigned>(work > 65535 ? 65535 : work));
  if (a.K == 4)
    conv1d_kernel<4><<<grid, kThreads, 0, s>>>(a, strips);
  else
    conv1d_kernel<0><<<grid, kThreads, 0, s>>>(a, strips);
  if (a.state && a.K > 1) conv1d_state_kernel<<<blocks_for(a.B * a.C), kThreads, 0, s>>>(a);
}

void launch_ssd_prepare(ConstRows dt_raw, const float* dt_bias, const float* A_log, float dt_min,
                        float dt_max, Rows dt, float* A, cudaStream_t s) {
  ssd_prepare_kernel<<<blocks_for(dt_raw.rows * dt_raw.cols), kThreads, 0, s>>>(dt_raw, dt_bias, A_log,
                                                                                 dt_min, dt_max, dt, A);
}

// The slices per state row: the fewest (a power of two, at most 32) that
// keep each thread's share within 8 entries, so that the dependent sum of a
// step is short (N = 128: 16 threads of 8); N up to 1024 (32 of 32).
static int ssd_slices(int64_t N) {
  int S = 1;
  while (S < 32 && (N + S - 1) / S > 8) S *= 2;
  return S;
}

template <class T>
static void launch_ssd_scan_per(const SsdScanLaunch& a, int64_t need, dim3 grid, dim3 block, size_t smem,
                                cudaStream_t s, int S, int stage) {
  if (need <= 1) ssd_scan_kernel<1, T><<<grid, block, smem, s>>>(a, S, stage);
  else if (need <= 2) ssd_scan_kernel<2, T><<<grid, block, smem, s>>>(a, S, stage);
  else if (need <= 4) ssd_scan_kernel<4, T><<<grid, block, smem, s>>>(a, S, stage);
  else if (need <= 8) ssd_scan_kernel<8, T><<<grid, block, smem, s>>>(a, S, stage);
  else if (need <= 16) ssd_scan_kernel<16, T><<<grid, block, smem, s>>>(a, S, stage);
  else ssd_scan_kernel<32, T><<<grid, block, smem, s>>>(a, S, stage);
}

void launch_ssd_scan(const SsdScanLaunch& a, cudaStream_t s) {
  if (a.B * a.H == 0) return;
  const int S = ssd_slices(a.N);
  const int64_t need = (a.N + S - 1) / S;
  // As many steps per stage as fit in 40 KiB of shared memory (at most 64).
  const int64_t per_step = 2 * a.N + kRowsPerBlock + 2;
  const int stage = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(64, 10240 / per_step)));
  const size_t smem = static_cast<size_t>(stage * per_step) * sizeof(float);
  const int64_t row_blocks = (a.P + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(static_cast<unsigned>(a.B * a.H * row_blocks));
  const dim3 block(static_cast<unsigned>(std::min<int64_t>(a.P, kRowsPerBlock) * S));
  if (a.state.bf16) launch_ssd_scan_per<__nv_bfloat16>(a, need, grid, block, smem, s, S, stage);
  else launch_ssd_scan_per<float>(a, need, grid, block, smem, s, S, stage);
}

// The state rows a block of ssd_step_kernel takes: kRowsPerBlock while
// a launch of those has fewer than kWideFrom blocks (at batch 1 the 130m
// model's 96 blocks of one sequence, which a wider block would leave to
// 24 multiprocessors), else kWideRows times as many. 512 (the 130m model
// from batch 6, about four blocks a multiprocessor of an H100) is an
// estimate, not a measurement.
constexpr int kWideRows = 4;
constexpr int64_t kWideFrom = 512;

template <class T>
static auto ssd_step_kernel_for(bool wide, int64_t need) -> void (*)(SsdStepLaunch, int) {
  return wide         ? ssd_step_kernel<8, kWideRows, T>
         : need <= 1  ? ssd_step_kernel<1, 1, T>
         : need <= 2  ? ssd_step_kernel<2, 1, T>
         : need <= 4  ? ssd_step_kernel<4, 1, T>
         : need <= 8  ? ssd_step_kernel<8, 1, T>
                      : ssd_step_kernel<16, 1, T>;
}

// Wide blocks where they have a thread for each of their x channels, and
// 8 entries a row a thread (one instantiation; N from 17 to 256).
static bool takes_wide_blocks(const SsdStepLaunch& a) {
  const int S = ssd_slices(a.N);
  const int64_t need = (a.N + S - 1) / S;
  const int64_t threads = std::min<int64_t>(a.P, kRowsPerBlock) * S;
  const int64_t narrow_blocks = a.B * a.H * ((a.P + kRowsPerBlock - 1) / kRowsPerBlock);
  return narrow_blocks >= kWideFrom && a.P > kRowsPerBlock && need > 4 && need <= 8 &&
         threads >= kWideRows * kRowsPerBlock;
}

// The wide blocks' launches streamed by ssd_step_wide.cu instead, where its
// 16-byte pieces of 8 entries fit the rows (and the off switch,
// CudaResources::stream_state_step, is the caller's: it gives no a.rows).
bool ssd_step_streams(const SsdStepLaunch& a) {
  return a.B > 0 && takes_wide_blocks(a) && a.N % 8 == 0 && a.state.p &&
         reinterpret_cast<uintptr_t>(a.state.p) % 16 == 0;
}

void launch_ssd_step(const SsdStepLaunch& a, cudaStream_t s) {
  if (a.B == 0) return;
  if (a.rows && ssd_step_streams(a)) {
    launch_ssd_step_wide(a, s);
    if (a.gated) launch_ssd_step_norm(a, s);
    return;
  }
  const int S = ssd_slices(a.N);
  const int64_t need = (a.N + S - 1) / S;
  const int64_t threads = std::min<int64_t>(a.P, kRowsPerBlock) * S;
  const bool wide = takes_wide_blocks(a);
  const int64_t rows = wide ? kWideRows * kRowsPerBlock : kRowsPerBlock;
  const size_t smem = static_cast<size_t>(2 * a.N + rows + 2) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(a.B * a.H * ((a.P + rows - 1) / rows)));
  const dim3 block(static_cast<unsigned>(threads));
  const auto kernel = a.state.bf16 ? ssd_step_kernel_for<__nv_bfloat16>(wide, need)
                                   : ssd_step_kernel_for<float>(wide, need);
  launch_overlapped(a.overlap, kernel, grid, block, smem, s, a, S);
  if (a.gated) launch_ssd_step_norm(a, s);
}

}  // namespace ssm::cuda
