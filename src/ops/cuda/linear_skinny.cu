// launch_linear.h's kernels: a warp per output column (the multi-wave
// kernel) or several consecutive columns a warp in a grid the device holds
// at once (the one-wave kernel), its lanes over K in 16-byte pieces of W's
// row (skinny_pieces.h; when the rows allow it, else one value at a time,
// multi-wave only), each lane keeping the partial sums of all M rows; the
// lanes' sums are combined by shuffles in a fixed order. norm_linear's
// variants first normalise x's rows into shared memory. One row's own
// kernels (the norm at warp level, split and streamed columns) are
// linear_one_row.cu's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/cuda/launch_linear.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/skinny_pieces.h"

namespace ssm::cuda {
namespace skinny {
namespace {

constexpr int M_MAX = static_cast<int>(kSkinnyRows);

template <WeightType T>
__device__ float widen(const void* w, int64_t i) {
  if constexpr (T == WeightType::kF32)
    return static_cast<const float*>(w)[i];
  else if constexpr (T == WeightType::kBF16)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  else
    return __half2float(static_cast<const __half*>(w)[i]);
}

// norm_linear's rows, kNormPer values a thread at most (2,048 at four
// warps: a 130m decode step's 768 and 1536), so that every load of x, the
// gate and the norm's weight is issued before the first is used: one round
// trip for all (a loop of rounds took one round trip per round, and the
// weights' loads another after the barrier).
constexpr int kNormPer = 16;

// Shared memory of the norm: the M normalised rows of K, then the factor
// 1/rms of each (row, norm group), then a partial sum of squares a warp.
size_t norm_smem_floats(const SkinnyLinear& a) {
  return static_cast<size_t>(a.x.rows * a.x.cols + a.x.rows * (a.x.cols / a.norm_group) + kWarps);
}

// norm_linear's prologue, by the whole block: x's rows, gated, normalised
// into xs (M rows of K). The same in every block of the launch. One row of
// one norm group (the decode step's RMSNorm, and its gated norm at one
// group) sums its squares across the block: each thread its values in
// order, each warp by shuffles, then the warps' sums in order; more rows or
// groups take a warp per (row, group) over xs.
template <int PER>
__device__ void normalise_rows(const SkinnyLinear& a, float* xs) {
  const int M = static_cast<int>(a.x.rows), K = static_cast<int>(a.x.cols), MK = M * K;
  const int group = static_cast<int>(a.norm_group), groups = K / group;
  const int T = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  const bool gated = a.gate.p != nullptr;
  // Normalised unless the gate comes without a weight (gated_rms_norm's
  // plain gate); RMSNorm always is.
  const bool normalised = !gated || a.norm_weight;
  const bool gate_after = gated && a.norm_weight && a.norm_before_gate;
  float* r = xs + MK;               // M x groups
  float* partial = r + M * groups;  // kWarps
  // Every load first (the weight's too), then the stores: a store to xs
  // between two loads kept them a round trip apart. What the scaling pass
  // needs, f = w (times the gate's SiLU when the gate comes after the norm),
  // is all a thread keeps across the barriers; the row waits in xs
  // (registers held longer cost the launch blocks a multiprocessor).
  float g[PER], z[PER], f[PER];
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * T, m = i / K, k = i - m * K;
    g[j] = i < MK ? a.x.p[m * a.x.stride + k] : 0.f;
    z[j] = gated && i < MK ? a.gate.p[m * a.gate.stride + k] : 0.f;
    f[j] = a.norm_weight && i < MK ? a.norm_weight[k] : 1.f;
  }
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    if (gate_after) f[j] *= silu(z[j]);
    else if (gated) g[j] *= silu(z[j]);
    ss += g[j] * g[j];  // zero past the rows
    if (tid + j * T < MK) xs[tid + j * T] = g[j];
  }
  if (!normalised) return;  // the caller's barrier follows
  const int warp = tid / 32, lane = tid % 32;
  if (M == 1 && groups == 1) {
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (tid == 0) {
      float sum = 0.f;
      for (int v = 0; v < T / 32; ++v) sum += partial[v];
      r[0] = rsqrtf(sum / static_cast<float>(group) + a.eps);
    }
  } else {
    __syncthreads();
    for (int item = warp; item < M * groups; item += T / 32) {
      const float* v = xs + (item / groups) * K + (item % groups) * group;
      float sq = 0.f;
#pragma unroll 4
      for (int k = lane; k < group; k += 32) sq += v[k] * v[k];
      for (int o = 16; o > 0; o /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, o);
      if (lane == 0) r[item] = rsqrtf(sq / static_cast<float>(group) + a.eps);
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * T, m = i / K, k = i - m * K;
    if (i < MK) xs[i] = xs[i] * r[m * groups + k / group] * f[j];
  }
}

// acc[m] += the piece's 16 bytes of W (widened) times x's row m at k.
template <WeightType T>
__device__ void add_piece(const uint4 raw, const ConstRows& x, int M, int64_t k, float (&acc)[M_MAX]) {
  constexpr int V = kVec<T>;
  float w[V];
  widen_piece<T>(raw, w);
#pragma unroll
  for (int m = 0; m < M_MAX; ++m)
    if (m < M) {
      const float* xm = x.p + m * x.stride + k;
#pragma unroll
      for (int i = 0; i < V; i += 4) {
        const float4 xv = *reinterpret_cast<const float4*>(xm + i);
        acc[m] += w[i] * xv.x + w[i + 1] * xv.y + w[i + 2] * xv.z + w[i + 3] * xv.w;
      }
    }
}

// The rows of x a block's warps multiply: a's, or (NORM_PER > 0:
// norm_linear) normalised into shared memory by the whole block, after the
// weights' loads are issued and the previous kernel has finished.
template <int NORM_PER>
__device__ ConstRows rows_to_multiply(const SkinnyLinear& a) {
  ConstRows x = a.x;
  if constexpr (NORM_PER > 0) {
    extern __shared__ float4 norm_smem[];
    float* xs = reinterpret_cast<float*>(norm_smem);
    normalise_rows<NORM_PER>(a, xs);
    __syncthreads();
    x.p = xs;
    x.stride = x.cols;
  }
  return x;
}

// Column n of y from the lanes' partial sums of each row: shuffles in a
// fixed order, then lane 0 adds the bias and stores (or accumulates).
__device__ void store_column(const SkinnyLinear& a, const float (&acc)[M_MAX], int M, int64_t n, int lane) {
#pragma unroll
  for (int m = 0; m < M_MAX; ++m)
    if (m < M) {
      float v = acc[m];
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) {
        if (a.bias) v += a.bias[n];
        float* y = a.y.p + m * a.y.stride + n;
        *y = a.accumulate ? *y + v : v;
      }
    }
}

// The multi-wave kernel: a warp a column. NORM_PER: norm_linear's values a
// thread (normalise_rows), 0 for linear.
template <WeightType T, bool VEC, int NORM_PER>
__global__ void __launch_bounds__(kWarps * 32) skinny_kernel(SkinnyLinear a) {
  let_next_kernel_start();
  const int64_t n = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  const bool column = n < a.y.cols;  // the whole warp
  const int lane = threadIdx.x % 32, M = static_cast<int>(a.x.rows);
  const int64_t K = a.x.cols;
  const size_t elem = T == WeightType::kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(a.W) + (column ? n : 0) * a.w_stride * elem;
  constexpr int V = kVec<T>;
  uint4 ahead[kAhead] = {};
  if constexpr (VEC) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (column && k < K) ahead[i] = load_piece<T>(row, k);
    }
  }
  wait_for_previous_kernel();
  const ConstRows x = rows_to_multiply<NORM_PER>(a);
  if (!column) return;
  float acc[M_MAX];
#pragma unroll
  for (int m = 0; m < M_MAX; ++m) acc[m] = 0.f;
  // Each lane's pieces in order of k (the pieces loaded ahead, then the
  // rest, unrolled by 4 so that four loads are in flight at once): the sums'
  // order does not depend on how far ahead the loads went.
  if constexpr (VEC) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (k < K) add_piece<T>(ahead[i], x, M, k, acc);
    }
#pragma unroll 4
    for (int64_t k = (int64_t{lane} + 32 * kAhead) * V; k < K; k += 32 * V)
      add_piece<T>(load_piece<T>(row, k), x, M, k, acc);
  } else {
#pragma unroll 4
    for (int64_t k = lane; k < K; k += 32) {
      const float w = widen<T>(row, k);
#pragma unroll
      for (int m = 0; m < M_MAX; ++m)
        if (m < M) acc[m] += w * x.p[m * x.stride + k];
    }
  }
  store_column(a, acc, M, n, lane);
}

// The one-wave kernel's 16-byte pieces a lane, all held in registers from
// before the wait: 48 registers. A 130m decode step's bf16 projections
// take 3 (in_proj, K = 768) or 6 (out_proj, K = 1536) a column, so two
// columns a warp where the grid's warps are fewer than the columns.
constexpr int kPieces = 12;

// The one-wave kernel: a grid no larger than the device holds at once, each
// warp owning `columns` consecutive columns of y (per_column pieces a lane
// each, columns x per_column <= kPieces), and every lane's pieces of all of
// them loaded before the wait, so that the whole of W is in flight while
// the previous kernel finishes (the multi-wave kernel's later blocks load
// only when earlier ones retire). The same sums in the same order as the
// multi-wave kernel's: only which warp computes a column differs.
template <WeightType T, int NORM_PER>
__global__ void __launch_bounds__(kWarps * 32) one_wave_kernel(SkinnyLinear a, int columns, int per_column) {
  let_next_kernel_start();
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x % 32, M = static_cast<int>(a.x.rows);
  const int64_t K = a.x.cols, first = (blockIdx.x * int64_t{kWarps} + threadIdx.x / 32) * columns;
  const int64_t end = first + columns < a.y.cols ? first + columns : a.y.cols;  // first >= end: idle warp
  const char* W = static_cast<const char*>(a.W);
  const int64_t row_bytes = a.w_stride * (T == WeightType::kF32 ? 4 : 2);
  // Piece i of a lane: column first + i / per_column at piece i % per_column
  // of the row (counted along, so that the registers' indices stay constant).
  uint4 w[kPieces] = {};
  {
    int c = 0, j = 0;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int64_t k = (int64_t{lane} + 32 * j) * V;
      if (first + c < end && k < K) w[i] = load_piece<T>(W + (first + c) * row_bytes, k);
      if (++j == per_column) j = 0, ++c;
    }
  }
  wait_for_previous_kernel();
  const ConstRows x = rows_to_multiply<NORM_PER>(a);
  if (first >= end) return;
  float acc[M_MAX];
#pragma unroll
  for (int m = 0; m < M_MAX; ++m) acc[m] = 0.f;
  int c = 0, j = 0;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int64_t n = first + c, k = (int64_t{lane} + 32 * j) * V;
    if (n < end) {  // the whole warp
      if (k < K) add_piece<T>(w[i], x, M, k, acc);
      if (j == per_column - 1) {
        store_column(a, acc, M, n, lane);
#pragma unroll
        for (int m = 0; m < M_MAX; ++m) acc[m] = 0.f;
      }
    }
    if (++j == per_column) j = 0, ++c;
  }
}

// How launch_typed runs a: the one-wave kernel (one_wave set, blocks, and
// its columns and pieces a warp) or the multi-wave one.
struct Plan {
  bool one_wave = false;
  void (*multi)(SkinnyLinear) = nullptr;
  void (*single)(SkinnyLinear, int, int) = nullptr;
  unsigned blocks = 0;
  int columns = 0, per_column = 0;
  size_t smem = 0;
};

template <WeightType T>
Plan plan_typed(const SkinnyLinear& a) {
  constexpr int V = kVec<T>;
  const int64_t elem = T == WeightType::kF32 ? 4 : 2, K = a.x.cols, N = a.y.cols;
  // 16-byte pieces need K, both row strides and both base addresses aligned
  // (the normalised rows in shared memory are).
  const bool vec = K % V == 0 && (a.w_stride * elem) % 16 == 0 && reinterpret_cast<uintptr_t>(a.W) % 16 == 0 &&
                   (a.norm || (a.x.stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x.p) % 16 == 0));
  Plan p;
  p.smem = a.norm ? norm_smem_floats(a) * sizeof(float) : 0;
  // Half the values a thread where they do: 40 registers fewer, so that a
  // 130m in_proj's 838 blocks take two waves of the multiprocessors, not three.
  const bool half = a.x.rows * a.x.cols <= int64_t{kNormPer / 2} * kWarps * 32;
  p.multi = !a.norm ? (vec ? skinny_kernel<T, true, 0> : skinny_kernel<T, false, 0>)
            : half  ? (vec ? skinny_kernel<T, true, kNormPer / 2> : skinny_kernel<T, false, kNormPer / 2>)
                    : (vec ? skinny_kernel<T, true, kNormPer> : skinny_kernel<T, false, kNormPer>);
  p.blocks = static_cast<unsigned>((N + kWarps - 1) / kWarps);
  const int64_t per_column = (K + 32 * V - 1) / (32 * V);
  if (!a.one_wave || !vec || per_column > kPieces) return p;
  void (*single)(SkinnyLinear, int, int) = !a.norm ? one_wave_kernel<T, 0>
                                           : half  ? one_wave_kernel<T, kNormPer / 2>
                                                   : one_wave_kernel<T, kNormPer>;
  const int64_t warps = int64_t{resident_blocks(reinterpret_cast<const void*>(single), p.smem)} * kWarps;
  if (warps == 0) return p;
  const int64_t columns = (N + warps - 1) / warps;
  if (columns * per_column > kPieces) return p;  // W does not fit in one wave's registers
  p.one_wave = true;
  p.single = single;
  p.columns = static_cast<int>(columns);
  p.per_column = static_cast<int>(per_column);
  p.blocks = static_cast<unsigned>(((N + columns - 1) / columns + kWarps - 1) / kWarps);
  return p;
}

Plan plan_of(const SkinnyLinear& a) {
  return for_weight_type(a.type, [&](auto t) { return plan_typed<decltype(t)::value>(a); });
}

}  // namespace

// Blocks of `kernel` that a device holds at once: the occupancy API's per
// multiprocessor times the multiprocessors, asked once per (kernel, device,
// shared memory) and kept (a recorded decode step asks nothing); 0 where
// the API fails (the multi-wave kernel then). In the emulator, whose blocks
// run one after another, as many as an H100 has multiprocessors: a 130m
// out_proj then takes two columns a warp, and the tests' widest rows fall
// back to the multi-wave kernel.
int resident_blocks(const void* kernel, size_t smem, int threads) {
#ifdef SSM_CUDA_EMULATOR
  (void)kernel, (void)smem, (void)threads;
  return 132;
#else
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t, int>, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(kernel, device, smem, threads);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess)
    sms = per_sm = 0;
  return known[key] = sms * per_sm;
#endif
}

}  // namespace skinny

using namespace skinny;

bool skinny_norm_fits(const SkinnyLinear& a) {
  return a.norm_group > 0 && a.x.cols % a.norm_group == 0 &&
         a.x.rows * a.x.cols <= int64_t{kNormPer} * kWarps * 32 &&
         norm_smem_floats(a) * sizeof(float) <= size_t{48} << 10;
}

bool skinny_warp_norm_fits(const SkinnyLinear& a) {
  // A group spans K, or whole aligned runs of up to 32 lanes' pieces
  // (add_group_norm_piece).
  const int64_t V = a.type == WeightType::kF32 ? 4 : 8, lanes = a.norm_group / V;
  const bool groups_fit = a.norm_group == a.x.cols || (a.norm_group > 0 && a.norm_group % V == 0 &&
                                                       a.x.cols % a.norm_group == 0 && lanes <= 32 &&
                                                       (lanes & (lanes - 1)) == 0);
  return one_row_in_pieces(a) && groups_fit &&
         (a.gate.p == nullptr || (a.gate.stride % 4 == 0 && aligned16(a.gate.p))) &&
         (a.norm_weight == nullptr || aligned16(a.norm_weight));
}

bool skinny_in_one_wave(const SkinnyLinear& a) { return a.y.rows * a.y.cols > 0 && plan_of(a).one_wave; }

void launch_skinny_linear(const SkinnyLinear& a, cudaStream_t s) {
  if (a.y.rows * a.y.cols == 0) return;
  if (launch_one_row(a, s)) return;
  const Plan p = plan_of(a);
  const dim3 block(kWarps * 32);
  if (p.one_wave)
    launch_overlapped(a.overlap, p.single, dim3(p.blocks), block, p.smem, s, a, p.columns, p.per_column);
  else
    launch_overlapped(a.overlap, p.multi, dim3(p.blocks), block, p.smem, s, a);
}

}  // namespace ssm::cuda
