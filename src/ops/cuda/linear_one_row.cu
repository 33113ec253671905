// One row's projections (a decode step at batch 1; launch_linear.h), the
// kernels linear_skinny.cu's multi-row ones leave to this file: the norm
// inside the products at warp level (norm_linear), a column's K split over
// several warps, and one row against many columns streamed by a one-wave
// grid. Each loads its first pieces of W before waiting for the kernel
// before it (overlap_launch.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/skinny_pieces.h"

namespace ssm::cuda::skinny {
namespace {

// One row against many columns (stream_columns: the decode step's head at
// batch 1, 50,277 columns of the 130m models, 77 MB in BF16): a grid the
// device holds at once, each warp striding over columns with the next
// column's pieces loaded while this one's are multiplied. The multi-wave
// kernel's 12,570 blocks of three pieces a lane drew about 2 TB/s from an
// H200 (38 us a token; docs/CUDA.md, the kernel trace): each block lived
// for one round trip of a few KB. P: pieces a lane a column, at least
// K / (32 V).
template <WeightType T, int P>
__global__ void __launch_bounds__(kWarps * 32) stream_columns_kernel(SkinnyLinear a) {
  let_next_kernel_start();
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * kWarps, N = a.y.cols, K = a.x.cols;
  const char* W = static_cast<const char*>(a.W);
  const int64_t row_bytes = a.w_stride * (T == WeightType::kF32 ? 4 : 2);
  const auto load = [&](uint4 (&dst)[P], int64_t n) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (n < N && k < K) dst[i] = load_piece<T>(W + n * row_bytes, k);
    }
  };
  int64_t n = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  uint4 cur[P] = {}, next[P] = {};
  load(cur, n);
  wait_for_previous_kernel();
  for (; n < N; n += warps) {  // the whole warp
    load(next, n + warps);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (k < K) add_row_piece<T>(cur[i], a.x.p, k, acc);
      cur[i] = next[i];
    }
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) {
      if (a.bias) acc += a.bias[n];
      float* y = a.y.p + n;
      *y = a.accumulate ? *y + acc : acc;
    }
  }
}

// norm_linear with the norm at warp level (FusedDecode::kWarp): a warp a
// column, as the multi-wave kernel, but no shared memory and no barrier.
// One norm group spans K (the decode step's RMSNorm before in_proj and its
// gated norm at one group before out_proj), and a warp's lanes already
// read all of x's row for their dot product, so each warp sums the row's
// squares beside it and scales at the end:
//   y_n = rsqrt(mean(g^2) + eps) * sum_k W_nk g_k f_k,
// g = x (times SiLU(gate) before the norm), f = the norm's weight (times
// SiLU(gate) after it). Every warp sums the squares in the same order, so
// every column gets the same factor. One row only: at 8 rows (128
// registers, and every warp taking SiLU of all 8 gate rows) a 130m Mamba-2
// decoded 3,890 tokens/s at batch 8 on an H100 against 6,390 with the norm
// apart (docs/CUDA.md). The
// block-level prologue
// (normalise_rows) paid a block's reduction and two barriers before any
// product, in every wave; this pays about K / 32 products a lane.
template <WeightType T>
__global__ void __launch_bounds__(kWarps * 32) warp_norm_kernel(SkinnyLinear a) {
  let_next_kernel_start();
  constexpr int V = kVec<T>;
  const int64_t n = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  const bool column = n < a.y.cols;  // the whole warp
  const int lane = threadIdx.x % 32;
  const int64_t K = a.x.cols;
  const void* row = static_cast<const char*>(a.W) + (column ? n : 0) * a.w_stride * (T == WeightType::kF32 ? 4 : 2);
  uint4 ahead[kAhead] = {};
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int64_t k = (int64_t{lane} + 32 * i) * V;
    if (column && k < K) ahead[i] = load_piece<T>(row, k);
  }
  wait_for_previous_kernel();
  if (!column) return;
  // y's value when accumulating and the bias, read now so that their round
  // trip overlaps the sums (split_k_kernel's leader does the same).
  const float prev = lane == 0 && a.accumulate ? a.y.p[n] : 0.f, bias = lane == 0 && a.bias ? a.bias[n] : 0.f;
  const bool gated = a.gate.p != nullptr;
  const bool normalised = !gated || a.norm_weight;  // as normalise_rows
  const bool gate_after = gated && a.norm_weight && a.norm_before_gate;
  // Groups narrower than K: each piece scaled by its group's factor.
  const bool grouped = normalised && a.norm_group != K;
  const int group_lanes = static_cast<int>(a.norm_group / V);
  float acc = 0.f, ss = 0.f;
  const auto add = [&](const uint4 raw, int64_t k) {
    if (grouped) add_group_norm_piece<T>(a, gated, gate_after, raw, k, group_lanes, acc);
    else add_norm_piece<T>(a, gated, gate_after, raw, k, acc, ss);
  };
  // Each lane's pieces in order of k, as the multi-wave kernel's.
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int64_t k = (int64_t{lane} + 32 * i) * V;
    if (k < K) add(ahead[i], k);
  }
#pragma unroll 2
  for (int64_t k = (int64_t{lane} + 32 * kAhead) * V; k < K; k += 32 * V) add(load_piece<T>(row, k), k);
  for (int o = 16; o > 0; o /= 2) {
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  }
  if (lane == 0) {
    if (normalised && !grouped) acc *= rsqrtf(ss / static_cast<float>(K) + a.eps);
    if (a.bias) acc += bias;
    a.y.p[n] = a.accumulate ? prev + acc : acc;
  }
}

// One row's projection (NORM: norm_linear's, the norm at warp level) with
// a column's K split over `wpc` warps of a block (FusedDecode::kSplit, the
// default), PPL pieces a lane at most, all loaded before the wait. With a warp a column, the 130m out_proj (K = 1536, gated)
// gave each lane 48 values' SiLU and products in sequence, with 768 warps on
// the H200's 528 schedulers to hide their latency: 7.0 us a launch, the
// largest part of a batch-1 decode layer (docs/CUDA.md, the kernel trace).
// Here a lane takes 8 values (one piece) where the grid still fits in one
// wave; so does a plain projection of few columns and long rows (Mamba-3's
// out_proj, whose norm is per head, in its own op). Each warp sums its lanes by shuffles, then the column's warps' sums
// are added in warp order by one thread: every column gets the same factor.
// `columns` columns a block, `wpc` warps each (columns x wpc <= kSplitWarps).
constexpr int kSplitWarps = 8;

template <WeightType T, int PPL, bool NORM>
__global__ void __launch_bounds__(kSplitWarps * 32) split_k_kernel(SkinnyLinear a, int wpc) {
  let_next_kernel_start();
  constexpr int V = kVec<T>;
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
  const int columns = static_cast<int>(blockDim.x) / (32 * wpc), in_block = warp / wpc;
  const int lanes = 32 * wpc, tc = (warp % wpc) * 32 + lane;  // the column's lanes, this one's index
  const int64_t n = blockIdx.x * int64_t{columns} + in_block;
  const bool column = n < a.y.cols;  // the whole warp
  const int64_t K = a.x.cols;
  const void* row = static_cast<const char*>(a.W) + (column ? n : 0) * a.w_stride * (T == WeightType::kF32 ? 4 : 2);
  uint4 ahead[PPL] = {};
#pragma unroll
  for (int i = 0; i < PPL; ++i) {
    const int64_t k = (int64_t{tc} + int64_t{lanes} * i) * V;
    if (column && k < K) ahead[i] = load_piece<T>(row, k);
  }
  wait_for_previous_kernel();
  // What the column's sum is added to (y's value when accumulating: the
  // residual), read by its leader now rather than after the sums, so that
  // the round trip overlaps them.
  const bool leader = column && tc == 0;
  const float prev = leader && a.accumulate ? a.y.p[n] : 0.f, bias = leader && a.bias ? a.bias[n] : 0.f;
  const bool gated = NORM && a.gate.p != nullptr;
  const bool normalised = NORM && (!gated || a.norm_weight);  // as normalise_rows
  const bool gate_after = gated && a.norm_weight && a.norm_before_gate;
  const bool grouped = normalised && a.norm_group != K;  // as warp_norm_kernel
  float acc = 0.f, ss = 0.f;
  if (column) {
#pragma unroll
    for (int i = 0; i < PPL; ++i) {
      const int64_t k = (int64_t{tc} + int64_t{lanes} * i) * V;
      if (k >= K) continue;
      if constexpr (NORM) {
        if (grouped) add_group_norm_piece<T>(a, gated, gate_after, ahead[i], k, static_cast<int>(a.norm_group / V), acc);
        else add_norm_piece<T>(a, gated, gate_after, ahead[i], k, acc, ss);
      } else {
        add_row_piece<T>(ahead[i], a.x.p, k, acc);
      }
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if constexpr (NORM) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  }
  __shared__ float sums[2][kSplitWarps];
  if (lane == 0) sums[0][warp] = acc, sums[1][warp] = ss;
  __syncthreads();
  if (!leader) return;
  float dot = 0.f, squares = 0.f;
  for (int w = warp; w < warp + wpc; ++w) dot += sums[0][w], squares += sums[1][w];
  if (normalised && !grouped) dot *= rsqrtf(squares / static_cast<float>(K) + a.eps);
  if (a.bias) dot += bias;
  a.y.p[n] = a.accumulate ? prev + dot : dot;
}

// How launch_one_row runs a: kernel (one of the three; null: none takes
// a), its grid and block, and for split_k_kernel the warps a column.
struct OneRowPlan {
  void (*kernel)(SkinnyLinear) = nullptr;
  void (*split)(SkinnyLinear, int) = nullptr;
  unsigned blocks = 0, threads = kWarps * 32;
  int wpc = 0;
};

// split_k_kernel's plan: the fewest pieces a lane (1, 2 or 4) whose grid
// the device holds in one wave, else 4; none (split unset) where one warp a
// column would do (warp_norm_kernel) or a column would need more than
// kSplitWarps warps of 4 pieces a lane.
template <WeightType T>
OneRowPlan split_plan(const SkinnyLinear& a) {
  constexpr int V = kVec<T>;
  const int64_t pieces = (a.x.cols + V - 1) / V, N = a.y.cols;
  OneRowPlan p;
  for (const int ppl : {1, 2, 4}) {
    const int64_t wpc = (pieces + 32 * ppl - 1) / (32 * ppl);
    if (wpc > kSplitWarps) continue;
    if (wpc == 1) return OneRowPlan{};  // warp_norm_kernel's work, without the barrier
    const int64_t columns = kSplitWarps / wpc;
    if (a.norm)
      p.split = ppl == 1 ? split_k_kernel<T, 1, true> : ppl == 2 ? split_k_kernel<T, 2, true> : split_k_kernel<T, 4, true>;
    else
      p.split = ppl == 1 ? split_k_kernel<T, 1, false> : ppl == 2 ? split_k_kernel<T, 2, false> : split_k_kernel<T, 4, false>;
    p.wpc = static_cast<int>(wpc);
    p.threads = static_cast<unsigned>(columns * wpc * 32);
    p.blocks = static_cast<unsigned>((N + columns - 1) / columns);
    if (int64_t{p.blocks} <= resident_blocks(reinterpret_cast<const void*>(p.split), 0, static_cast<int>(p.threads))) break;
  }
  return p;
}

template <WeightType T>
OneRowPlan plan_typed(const SkinnyLinear& a) {
  constexpr int V = kVec<T>;
  const int64_t K = a.x.cols, N = a.y.cols;
  if (a.norm && a.warp_norm && a.split_k)
    if (OneRowPlan p = split_plan<T>(a); p.split) return p;
  OneRowPlan p;
  if (!a.norm && a.stream_columns && one_row_in_pieces(a)) {
    const int64_t pieces = (K + 32 * V - 1) / (32 * V);
    p.kernel = pieces <= 2 ? stream_columns_kernel<T, 2>
               : pieces <= 4 ? stream_columns_kernel<T, 4>
                             : stream_columns_kernel<T, 8>;
    const int64_t blocks = resident_blocks(reinterpret_cast<const void*>(p.kernel), 0);
    // Columns enough for each warp to stream several.
    if (pieces <= 8 && blocks > 0 && N >= 4 * blocks * kWarps) {
      p.blocks = static_cast<unsigned>(blocks);
      return p;
    }
    p = OneRowPlan{};
  }
  if (!a.norm && a.split_k && one_row_in_pieces(a))
    if (OneRowPlan q = split_plan<T>(a); q.split) return q;
  if (a.norm && a.warp_norm) {
    // skinny_warp_norm_fits has checked the pieces' alignment and the group.
    p.kernel = warp_norm_kernel<T>;
    p.blocks = static_cast<unsigned>((N + kWarps - 1) / kWarps);
  }
  return p;
}

OneRowPlan plan_of(const SkinnyLinear& a) {
  return for_weight_type(a.type, [&](auto t) { return plan_typed<decltype(t)::value>(a); });
}

}  // namespace

bool launch_one_row(const SkinnyLinear& a, cudaStream_t s) {
  const OneRowPlan p = plan_of(a);
  if (p.split)
    launch_overlapped(a.overlap, p.split, dim3(p.blocks), dim3(p.threads), 0, s, a, p.wpc);
  else if (p.kernel)
    launch_overlapped(a.overlap, p.kernel, dim3(p.blocks), dim3(p.threads), 0, s, a);
  return p.split || p.kernel;
}

}  // namespace ssm::cuda::skinny
