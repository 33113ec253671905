// mamba2_decode_stack on the GPU: a stack of Mamba-2 decode layers as
// three phases a layer, each a device function of (layer, block):
//   0  in_proj: every block normalises h (the block's RMSNorm) into shared
//      memory, then projects its own slice of the output columns;
//   1  the scan step: work items (b, h, 16 rows of P): the convolution of
//      the item's x channels and of its group's B and C channels
//      (recomputed by every item that needs them), dt, one step of the
//      recurrence, y + D x, the gate; y goes to scratch with the item's sum
//      of squares in a slot of its own (no float atomics: the consumer sums
//      the slots in order);
//   2  out_proj: every block sums the slots for the gated norm's scales,
//      normalises y into shared memory and projects its slice of the D
//      columns, adding into h; the convolution states are shifted here,
//      after every item of phase 1 has read them.
// One cooperative launch runs every phase, a grid barrier between two (a
// generation-counted counter). Weights stream while the blocks wait there:
// once a block has projected in_proj, it copies its slices of out_proj and
// of the next layer's in_proj into its shared memory (cp.async), which the
// phases that need them wait for (where they do not fit, it asks L2 for
// them instead). In phase-per-launch mode each phase
// is a plain launch, no barrier: the CPU emulator (scripts/cuda-emulate),
// which runs blocks one after another, checks the phases that way. Results
// do not depend on the grid's size (every sum is one thread's or one warp's,
// in a fixed order).
#include <algorithm>
#include <cstdint>

#include "ops/cuda/decode_stack_memory.h"
#include "ops/cuda/launch_mamba2_decode.h"
#include "ops/cuda/tf32_mma.h"  // copy16_async

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kSlices = kThreads / kDecodeRows;  // threads sharing a state row: 16
constexpr int R = kDecodeMaxRows;

__device__ __forceinline__ float silu(float z) { return z / (1.f + expf(-z)); }
__device__ __forceinline__ float softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

// The block's columns of a projection with `cols` outputs.
struct ColumnSlice {
  int begin, end;
};
__device__ __forceinline__ ColumnSlice column_slice(int cols) {
  const int per = (cols + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int begin = min(cols, static_cast<int>(blockIdx.x) * per);
  return {begin, min(cols, begin + per)};
}

// y[b, n] (+)= xs[b, :] . W[n, :] (+ bias[n]) for the block's columns n,
// a warp per column; each lane sums its pieces in order of k, the lanes by
// shuffles: the order depends on nothing but K.
// `staged`: the block's rows of W are in shared memory (stage_slice).
template <bool BF16>
__device__ void project(const void* W, const void* staged, const float* bias, int K, int cols,
                        const float* xs, int B, float* y, int ldy, bool accumulate) {
  constexpr int V = kVec<BF16>;
  const ColumnSlice s = column_slice(cols);
  const int lane = threadIdx.x % 32;
  for (int n = s.begin + static_cast<int>(threadIdx.x) / 32; n < s.end; n += kWarps) {
    const int64_t row_bytes = int64_t{K} * (BF16 ? 2 : 4);
    const char* row = staged ? static_cast<const char*>(staged) + (n - s.begin) * row_bytes
                             : static_cast<const char*>(W) + n * row_bytes;
    float acc[R];
#pragma unroll
    for (int b = 0; b < R; ++b) acc[b] = 0.f;
#pragma unroll 4
    for (int k = lane * V; k < K; k += 32 * V) {
      float w[V];
      widen_piece<BF16>(staged ? *reinterpret_cast<const uint4*>(row + k * (BF16 ? 2 : 4))
                               : load_piece<BF16>(row, k),
                        w);
#pragma unroll
      for (int b = 0; b < R; ++b)
        if (b < B) {
          const float* x = xs + b * K + k;
#pragma unroll
          for (int i = 0; i < V; ++i) acc[b] += w[i] * x[i];
        }
    }
#pragma unroll
    for (int b = 0; b < R; ++b)
      if (b < B) {
        float v = acc[b];
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) {
          if (bias) v += bias[n];
          float* out = y + int64_t{b} * ldy + n;
          *out = accumulate ? load_l2(out) + v : v;
        }
      }
  }
}

// The block's RMSNorm of h's B rows into xs (B x D): each thread's sums in
// order, the warps' by shuffles, the warps' sums in order.
__device__ void normalise_h(const Mamba2DecodeLaunch& a, const float* w, float* xs, float* red) {
  const int D = a.D, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float ss[R];
#pragma unroll
  for (int b = 0; b < R; ++b) ss[b] = 0.f;
  for (int k = threadIdx.x; k < D; k += kThreads)
#pragma unroll
    for (int b = 0; b < R; ++b)
      if (b < a.B) {
        const float v = load_l2(a.h + int64_t{b} * D + k);
        xs[b * D + k] = v;
        ss[b] += v * v;
      }
#pragma unroll
  for (int b = 0; b < R; ++b)
    if (b < a.B) {
      float v = ss[b];
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) red[warp * R + b] = v;
    }
  __syncthreads();
  if (threadIdx.x < a.B) {
    float t = 0.f;
    for (int i = 0; i < kWarps; ++i) t += red[i * R + threadIdx.x];
    red[kWarps * R + threadIdx.x] = rsqrtf(t / static_cast<float>(D) + a.eps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.B * D; i += kThreads) xs[i] *= red[kWarps * R + i / D] * w[i % D];
  __syncthreads();
}

struct Dims {
  int HP, GN, C, NZ;  // H*P, G*N, conv channels, in_proj's outputs
  __device__ explicit Dims(const Mamba2DecodeLaunch& a)
      : HP(a.H * a.P),
        GN(a.G * a.N),
        C(a.H * a.P + 2 * a.G * a.N),
        NZ(2 * a.H * a.P + 2 * a.G * a.N + a.H) {}
};

template <bool BF16>
__device__ void in_proj_phase(const Mamba2DecodeLaunch& a, const Mamba2DecodeLayer& l, float* smem,
                              const void* staged) {
  const Dims d(a);
  float* xs = smem;
  normalise_h(a, l.norm_weight, xs, xs + a.B * a.D);
  project<BF16>(l.in_proj, staged, l.in_bias, a.D, d.NZ, xs, a.B, a.zxbcdt, d.NZ, false);
}

// conv(channel c) at this step: bias, the K-1 inputs of the state oldest
// first, then the new one (the definition's order), SiLU'd.
__device__ __forceinline__ float conv_step(const Mamba2DecodeLaunch& a, const Mamba2DecodeLayer& l,
                                           const float* cst, const float* in, int C, int c) {
  const int K = a.K;
  float acc = l.conv_bias ? l.conv_bias[c] : 0.f;
  for (int k = 0; k + 1 < K; ++k) acc += l.conv_weight[c * K + k] * load_l2(cst + k * C + c);
  acc += l.conv_weight[c * K + K - 1] * load_l2(in + c);
  return silu(acc);
}

template <int PER>
__device__ void scan_phase(const Mamba2DecodeLaunch& a, const Mamba2DecodeLayer& l, float* smem) {
  const Dims d(a);
  const int N = a.N, rb_per_head = a.P / kDecodeRows, items = a.B * a.H * rb_per_head;
  float* sBC = smem;                 // 2N: the group's B, then C
  float* sx = sBC + 2 * N;           // kDecodeRows
  float* ssq = sx + kDecodeRows;     // kDecodeRows
  float* sstep = ssq + kDecodeRows;  // dt, exp(dt A)
  const int pl = threadIdx.x / kSlices, j = threadIdx.x % kSlices;
  for (int item = static_cast<int>(blockIdx.x); item < items; item += static_cast<int>(gridDim.x)) {
    const int b = item / (a.H * rb_per_head), hr = item % (a.H * rb_per_head);
    const int h = hr / rb_per_head, p0 = (hr % rb_per_head) * kDecodeRows, g = h / (a.H / a.G);
    const float* row = a.zxbcdt + int64_t{b} * d.NZ;
    const float* in = row + d.HP;  // the conv input, C channels
    const float* cst = l.conv_state + int64_t{b} * (a.K - 1) * d.C;
    for (int i = threadIdx.x; i < 2 * N; i += kThreads)
      sBC[i] = conv_step(a, l, cst, in, d.C, d.HP + (i < N ? g * N + i : d.GN + g * N + (i - N)));
    if (threadIdx.x < kDecodeRows)
      sx[threadIdx.x] = conv_step(a, l, cst, in, d.C, h * a.P + p0 + threadIdx.x);
    if (threadIdx.x == 0) {
      const float dt =
          fminf(fmaxf(softplus(load_l2(row + d.HP + d.C + h) + l.dt_bias[h]), a.dt_min), a.dt_max);
      sstep[0] = dt;
      sstep[1] = expf(dt * -expf(l.A_log[h]));
    }
    __syncthreads();
    const int p = p0 + pl, c = h * a.P + p;
    float* state = l.state + ((int64_t{b} * a.H + h) * a.P + p) * N;
    float st[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int n = j + kSlices * k;
      st[k] = n < N ? state[n] : 0.f;
    }
    const float xv = sx[pl], decay = sstep[1], coef = sstep[0] * xv;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int n = j + kSlices * k;
      if (n < N) {
        st[k] = decay * st[k] + coef * sBC[n];
        acc += st[k] * sBC[N + n];
        state[n] = st[k];
      }
    }
    for (int o = kSlices / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o, kSlices);
    if (j == 0) {
      const float yv = acc + (l.D ? l.D[h] : 0.f) * xv;
      // The gated norm's input (rms_norm.h): y itself when the norm comes
      // before the gate, else y SiLU(z).
      const float v = l.gate_norm_weight && a.norm_before_gate ? yv : yv * silu(load_l2(row + c));
      a.y[int64_t{b} * d.HP + c] = v;
      ssq[pl] = v * v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = 0.f;
      for (int i = 0; i < kDecodeRows; ++i) t += ssq[i];
      a.sums[int64_t{b} * (d.HP / kDecodeRows) + (h * a.P + p0) / kDecodeRows] = t;
    }
    __syncthreads();  // sBC, sx, ssq are the next item's
  }
}

template <bool BF16>
__device__ void out_proj_phase(const Mamba2DecodeLaunch& a, const Mamba2DecodeLayer& l, float* smem,
                               const void* staged) {
  const Dims d(a);
  const int HP = d.HP, groups = HP / a.norm_group, slots = HP / kDecodeRows;
  const int per_group = a.norm_group / kDecodeRows;
  float* xs = smem;              // B x HP
  float* scale = xs + a.B * HP;  // B x groups
  const float* w = l.gate_norm_weight;
  if (w)
    for (int i = threadIdx.x; i < a.B * groups; i += kThreads) {
      const float* s = a.sums + int64_t{i / groups} * slots + (i % groups) * per_group;
      float t = 0.f;
      for (int k = 0; k < per_group; ++k) t += load_l2(s + k);
      scale[i] = rsqrtf(t / static_cast<float>(a.norm_group) + a.gate_eps);
    }
  __syncthreads();
  for (int i = threadIdx.x; i < a.B * HP; i += kThreads) {
    const int b = i / HP, k = i % HP;
    float v = load_l2(a.y + i);
    if (w) {
      v *= scale[b * groups + k / a.norm_group] * w[k];
      if (a.norm_before_gate) v *= silu(load_l2(a.zxbcdt + int64_t{b} * d.NZ + k));
    }
    xs[i] = v;
  }
  __syncthreads();
  project<BF16>(l.out_proj, staged, l.out_bias, HP, a.D, xs, a.B, a.h, a.D, true);
  // The convolution states move on by one step: every item of the scan
  // phase has read them.
  const int W = a.K - 1;
  if (W > 0)
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < a.B * d.C; i += gridDim.x * kThreads) {
      const int b = i / d.C, c = i % d.C;
      float* cst = l.conv_state + int64_t{b} * W * d.C + c;
      for (int k = 1; k < W; ++k) cst[(k - 1) * d.C] = load_l2(cst + k * d.C);
      cst[(W - 1) * d.C] = load_l2(a.zxbcdt + int64_t{b} * d.NZ + HP + c);
    }
}

// What the block reads in phases after `phase` that no phase before them
// writes (weights; the state rows, written only by their own item), asked
// of L2 before the block waits at the barrier.
template <bool BF16>
__device__ void prefetch_after(const Mamba2DecodeLaunch& a, int phase, int last) {
  const Dims d(a);
  const int kind = phase % 3, layer = phase / 3;
  const int64_t elem = BF16 ? 2 : 4;
  if (kind == 0) {
    const Mamba2DecodeLayer& l = a.layers[layer];
    const int64_t row_bytes = int64_t{a.N} * 4 * kDecodeRows, rb = a.P / kDecodeRows;
    for (int item = blockIdx.x; item < a.B * a.H * rb; item += gridDim.x)
      prefetch_l2(l.state + item * int64_t{kDecodeRows} * a.N, row_bytes);
    if (a.stage_weights) return;  // copied into shared memory already
    const ColumnSlice s = column_slice(a.D);
    prefetch_l2(static_cast<const char*>(l.out_proj) + int64_t{s.begin} * d.HP * elem,
                int64_t{s.end - s.begin} * d.HP * elem);
  } else if (kind == 2 && phase + 1 < last && !a.stage_weights) {
    const ColumnSlice s = column_slice(d.NZ);
    prefetch_l2(
        static_cast<const char*>(a.layers[layer + 1].in_proj) + int64_t{s.begin} * a.D * elem,
        int64_t{s.end - s.begin} * a.D * elem);
  }
}

// Where a block's staged slices start in its shared memory: after the
// phases' own floats (smem_floats), 16-byte aligned.
struct Staging {
  char* in_proj;
  char* out_proj;
  int64_t in_bytes, out_bytes;  // the most a block's slice takes
};

// Copies the block's rows [slice) of W (rows of row_bytes) into dst.
__device__ void stage_slice(char* dst, const void* W, int cols, int64_t row_bytes) {
  const ColumnSlice s = column_slice(cols);
  const char* src = static_cast<const char*>(W) + s.begin * row_bytes;
  const int64_t bytes = (s.end - s.begin) * row_bytes;
  for (int64_t o = int64_t{threadIdx.x} * 16; o < bytes; o += int64_t{kThreads} * 16)
    copy16_async(reinterpret_cast<float*>(dst + o), reinterpret_cast<const float*>(src + o));
}

template <bool BF16, int PER>
__global__ void __launch_bounds__(kThreads, 1)
    decode_stack_kernel(const Mamba2DecodeLaunch a, int first, int last, int64_t smem_floats) {
  extern __shared__ float4 decode_smem[];
  float* smem = reinterpret_cast<float*>(decode_smem);
  const Dims d(a);
  const int64_t elem = BF16 ? 2 : 4, in_row = int64_t{a.D} * elem, out_row = int64_t{d.HP} * elem;
  char* staged_in = reinterpret_cast<char*>(smem + smem_floats);
  char* staged_out = staged_in + (d.NZ + gridDim.x - 1) / gridDim.x * in_row;
  // Copy groups in flight: the out projection's (issued after in_proj) and
  // the next layer's in_proj (after it, when that layer is this launch's).
  bool next_in_issued = false;
  for (int phase = first; phase < last; ++phase) {
    if (phase > first) grid_barrier(a.barrier);
    const int layer = phase / 3;
    const Mamba2DecodeLayer& l = a.layers[layer];
    switch (phase % 3) {
      case 0:
        if (a.stage_weights) {
          if (!next_in_issued) {
            stage_slice(staged_in, l.in_proj, d.NZ, in_row);
            commit_copies();
          }
          wait_copies<0>();
          __syncthreads();
        }
        in_proj_phase<BF16>(a, l, smem, a.stage_weights ? staged_in : nullptr);
        next_in_issued = false;
        if (a.stage_weights && phase + 2 < last) {
          // Every warp is done with staged_in: the next slices may land.
          __syncthreads();
          stage_slice(staged_out, l.out_proj, a.D, out_row);
          commit_copies();
          next_in_issued = phase + 3 < last;
          if (next_in_issued) {
            stage_slice(staged_in, a.layers[layer + 1].in_proj, d.NZ, in_row);
            commit_copies();
          }
        }
        break;
      case 1:
        scan_phase<PER>(a, l, smem);
        break;
      default:
        if (a.stage_weights) {
          if (phase - 2 < first) {  // in_proj was another launch's: nothing issued yet
            stage_slice(staged_out, l.out_proj, a.D, out_row);
            commit_copies();
          }
          if (next_in_issued)
            wait_copies<1>();
          else
            wait_copies<0>();
          __syncthreads();
        }
        out_proj_phase<BF16>(a, l, smem, a.stage_weights ? staged_out : nullptr);
        break;
    }
    if (phase + 1 < last) prefetch_after<BF16>(a, phase, last);
  }
  wait_copies<0>();  // none left in flight at exit
}

constexpr int kMaxSmem = 200 * 1024;

// The phases' own floats (the normalised rows, the scan's B, C, x), a
// multiple of 4 (so the staged slices after them are 16-byte aligned).
int64_t smem_floats(const Mamba2DecodeLaunch& a) {
  const int64_t HP = int64_t{a.H} * a.P;
  const int64_t in_proj = int64_t{a.B} * a.D + (kWarps + 1) * R;
  const int64_t scan = 2 * int64_t{a.N} + 2 * kDecodeRows + 2;
  const int64_t out_proj = a.B * HP + a.B * (HP / a.norm_group);
  const int64_t most = std::max(in_proj, std::max(scan, out_proj));
  return (most + 3) / 4 * 4;
}
// The staged slices' bytes on `grid` blocks.
int64_t staged_bytes(const Mamba2DecodeLaunch& a, int grid) {
  const int64_t HP = int64_t{a.H} * a.P, NZ = 2 * HP + 2 * int64_t{a.G} * a.N + a.H,
                elem = a.bf16 ? 2 : 4;
  return (NZ + grid - 1) / grid * a.D * elem + (a.D + grid - 1) / grid * HP * elem;
}
size_t smem_bytes(const Mamba2DecodeLaunch& a, int grid) {
  return static_cast<size_t>(smem_floats(a) * 4 + (a.stage_weights ? staged_bytes(a, grid) : 0));
}

using Kernel = void (*)(const Mamba2DecodeLaunch, int, int, int64_t);
Kernel kernel_for(const Mamba2DecodeLaunch& a) {
  const bool small = a.N <= 8 * kSlices;
  if (a.bf16) return small ? decode_stack_kernel<true, 8> : decode_stack_kernel<true, 16>;
  return small ? decode_stack_kernel<false, 8> : decode_stack_kernel<false, 16>;
}

}  // namespace

int plan_mamba2_decode(Mamba2DecodeLaunch& a) {
  // What the kernel takes: up to 8 rows, 16-row items, norm groups of whole
  // items, K a multiple of every piece, N <= 256 (16 entries a thread).
  const int HP = a.H * a.P;
  if (a.B < 1 || a.B > R || a.P % kDecodeRows || a.norm_group % kDecodeRows || HP % a.norm_group ||
      a.D % 8 || HP % 8 || a.N > 16 * kSlices || a.K < 1 || a.G < 1 || a.H % a.G)
    return 0;
  a.stage_weights = false;
  if (smem_bytes(a, 1) > kMaxSmem) return 0;
#ifdef SSM_CUDA_EMULATOR
  // Blocks run one after another: a few, so that every block takes several
  // items and columns; the slices staged where they take up to 1 MB a
  // block (the small test stacks), not where more (the 130m layer), so that
  // both ways of reading the weights are checked.
  const int grid = 5;
  a.stage_weights = smem_floats(a) * 4 + staged_bytes(a, grid) <= (1 << 20);
  return grid;
#else
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  // Once a kernel, for the most a launch may ask (the first step is never
  // a recorded one, so this runs before any graph capture).
  static const bool opted_in[4] = {
      cudaFuncSetAttribute(decode_stack_kernel<true, 8>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem) == cudaSuccess,
      cudaFuncSetAttribute(decode_stack_kernel<true, 16>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem) == cudaSuccess,
      cudaFuncSetAttribute(decode_stack_kernel<false, 8>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem) == cudaSuccess,
      cudaFuncSetAttribute(decode_stack_kernel<false, 16>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem) == cudaSuccess};
  const bool opted = opted_in[(a.bf16 ? 0 : 2) + (a.N <= 8 * kSlices ? 0 : 1)];
  a.stage_weights = opted && smem_floats(a) * 4 + staged_bytes(a, sms) <= kMaxSmem;
  const size_t smem = smem_bytes(a, sms);
  if (smem > 48 * 1024 && !opted) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(a), kThreads, smem) !=
          cudaSuccess ||
      per_sm < 1)
    return 0;
  return sms;  // one a multiprocessor: every block resident at once, as the barrier needs
#endif
}

void launch_mamba2_decode(const Mamba2DecodeLaunch& a, int first, int last, int grid,
                          bool phase_per_launch, cudaStream_t s) {
  const Kernel k = kernel_for(a);
  const size_t smem = smem_bytes(a, grid);
  const int64_t floats = smem_floats(a);
#ifdef SSM_CUDA_EMULATOR
  // Blocks run one after another, so a grid barrier among several would
  // wait forever: the phases of one launch run on one block (which checks
  // the order of the staged copies across phases), a launch a phase on
  // the planned grid.
  if (!phase_per_launch) {
    emu::launch([&] { k(a, first, last, floats); }, dim3(1), dim3(kThreads), smem_bytes(a, 1), s);
    return;
  }
  for (int p = first; p < last; ++p)
    emu::launch([&] { k(a, p, p + 1, floats); }, dim3(grid), dim3(kThreads), smem, s);
#else
  if (phase_per_launch) {
    for (int p = first; p < last; ++p) k<<<grid, kThreads, smem, s>>>(a, p, p + 1, floats);
    return;
  }
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = s;
  config.attrs = attr;
  config.numAttrs = 1;
  // The launch's error is the caller's check_launch's (cudaGetLastError).
  (void)cudaLaunchKernelEx(&config, k, a, first, last, floats);
#endif
}

}  // namespace ssm::cuda
