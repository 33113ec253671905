// Mamba-3's SISO decode step for many sequences (launch_mamba3_scan where
// scan_kernel would take its wide blocks and mamba3_scan_streams): a state
// step that only streams, as ssd_step_wide.cu's for Mamba-2. scan_kernel's
// wide blocks staged k, q, v and the step's scalars in shared memory behind
// a barrier and kept 32 state entries and 32 of U_{t-1} a thread (128
// registers, two blocks a multiprocessor): 10,900 tokens/s for the 130m at
// batch 64 on an H100. Here each thread loads 16 bytes of state a row before
// the wait, with its 8 entries of k_prev and its rows' v_prev (written by
// this layer's last_step_kernel in an earlier step), then reads its 8 of k
// and q and its rows' v from L2: no shared memory, no barrier. The same
// arithmetic and order as scan_kernel (state_step_math.h), so a sequence
// gets the same bits at any batch.
#include <cstdint>

#include <cuda_bf16.h>

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/state_memory.h"
#include "ops/cuda/state_step_math.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
#pragma unroll
  for (int k = 0; k < 8; k += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + k);
    v[k] = f.x, v[k + 1] = f.y, v[k + 2] = f.z, v[k + 3] = f.w;
  }
}

// Threads as ssd_state_step_kernel's (ssd_step_wide.cu): W lanes a row,
// lane j owning entries 8j to 8j + 7, kThreads / W rows side by side and
// RPT rows a thread (BF16 4, F32 2). L = 1, R = 1: k, q (B, H, N), v, o
// (B, H, P), dt, lambda, A (B, H).
template <class T, int RPT>
__global__ void __launch_bounds__(kThreads, 4) scan_step_stream_kernel(Mamba3ScanLaunch a, int W, int row_blocks) {
  let_next_kernel_start();
  const int N = static_cast<int>(a.N), P = static_cast<int>(a.P), slots = kThreads / W;
  const int t = static_cast<int>(threadIdx.x), pl = t / W, j = t % W, n0 = 8 * j;
  const int64_t bh = blockIdx.x / row_blocks;
  const int p1 = static_cast<int>(blockIdx.x % row_blocks) * slots * RPT + pl;  // the thread's first row
  const bool owns = n0 < N;  // lanes past N (N < 8 W) hold zeros
  T* state = static_cast<T*>(a.ssm.p) + (bh * P + p1) * N + n0;
  Piece<T> st[RPT] = {};
  float kp[8] = {}, vp[RPT] = {};
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    if (p1 + r * slots >= P) continue;
    vp[r] = a.v_prev[bh * P + p1 + r * slots];
    if (owns) st[r] = load_piece(state + r * slots * N);
  }
  if (owns) load8(a.k_prev + bh * N + n0, kp);
  const float Dh = a.D ? a.D[bh % a.H] : 0.f;
  wait_for_previous_kernel();
  const Mamba3Coefs c = mamba3_coefs(a.dt[bh], a.lam[bh], a.A[bh]);
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int p = p1 + r * slots;
    const bool here = p < P;
    const float v = here ? a.v[bh * P + p] : 0.f;
    // k and q again for each row (from L1 after the first): kept across
    // the rows they took the registers of a fourth block.
    float kn[8] = {}, qn[8] = {};
    if (owns) {
      load8(a.k + bh * N + n0, kn);
      load8(a.q + bh * N + n0, qn);
    }
    float e[8];
    unpack(st[r], e);
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      e[k] = mamba3_entry(e[k], c, rank_term(0.f, vp[r], kp[k]), rank_term(0.f, v, kn[k]));
      acc = y_term(acc, e[k], qn[k]);
    }
    // Every thread of the block is here (kThreads is whole warps).
    for (int o = W / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o, W);
    if (here) {
      if (owns) store_piece(state + r * slots * N, e);
      if (j == 0) a.o[bh * P + p] = y_out(acc, Dh, v);
    }
  }
}

template <class T, int RPT>
void launch_stream(const Mamba3ScanLaunch& a, int W, cudaStream_t s) {
  const int64_t rows_a_block = kThreads / W * RPT;
  const int row_blocks = static_cast<int>((a.P + rows_a_block - 1) / rows_a_block);
  const dim3 grid(static_cast<unsigned>(a.B * a.H * row_blocks));
  launch_overlapped(a.overlap, scan_step_stream_kernel<T, RPT>, grid, dim3(kThreads), 0, s, a, W, row_blocks);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool mamba3_scan_streams(const Mamba3ScanLaunch& a) {
  return a.stream_state && a.L == 1 && a.R == 1 && a.N % 8 == 0 && a.N <= 256 && a.ssm.p && aligned16(a.ssm.p) &&
         aligned16(a.k) && aligned16(a.q) && aligned16(a.k_prev);
}

void launch_mamba3_scan_step(const Mamba3ScanLaunch& a, int W, cudaStream_t s) {
  if (a.ssm.bf16) launch_stream<__nv_bfloat16, 4>(a, W, s);
  else launch_stream<float, 2>(a, W, s);
}

}  // namespace ssm::cuda
