// Passes 1 and 3 of the SSD scan's backward (ssd_scan_backward.cu, whose
// header gives the math) on the tensor cores, for chunks of 64 steps and
// heads whose tiles fit shared memory (ssd_backward_tiles_fit):
//   chunk_sums      a block per (b, h, chunk) and per side: the chunk's own
//                   end state X^T diag(exp(cs_last - cs) dt) B (side 0) or
//                   its state gradient at its start dY^T diag(exp(cs)) C
//                   (side 1), a P x 64 by 64 x N product each;
//   chunk_backward  a block per (b, h, chunk): the masked, decayed 64 x 64
//                   matrices M1 = C B^T and M2 = dY X^T, then
//                     dS B = diag(exp(cs_last - cs)) B F^T + M1^T dY   (-> dx, x^T dS B)
//                     dB^h = diag(dt) (diag(exp(cs_last - cs)) X F + M2^T C)
//                     dC^h = diag(exp(cs)) dY S0 + M2 diag(dt) B
//                   with F the state gradient after the chunk and S0 the
//                   state before it (pass 2's results), and pass 4's
//                   g = <C, dC^h> - <B, dB^h> per step;
// The products are warp tiles of mma.sync m16n8k8 (tf32_warp_tiles.h): the
// 3xTF32 split (F32-exact to about 1e-6 relative) unless the context
// rounds its products (SsdScanBackwardLaunch::split false), F32
// accumulation, each sum over k in a fixed order, so results repeat bit for
// bit. Products with a causal factor (M1^T, M2^T, M2) run only over the k
// that can be nonzero.
#include <algorithm>

#include "ops/cuda/launch_train.h"
#include "ops/cuda/ssd_backward_chunk.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"

namespace ssm::cuda {
namespace {

using ssd_chunk::Chunk;
using ssd_chunk::chunk_of;
using ssd_chunk::chunk_step_weights;
using ssd_chunk::Geometry;
using ssd_chunk::geometry_of;
using ssd_chunk::kRows;
using ssd_chunk::load_decay;
using ssd_chunk::row_sums;
using ssd_chunk::warp_dd_part;
using ssd_chunk::write_step_sums;
using tiles::Acc;
using tiles::for_each_acc;
using tiles::kTileCols;
using tiles::load_rows;
using tiles::pitch;
using tiles::round_up;
using tiles::Smem;
using tiles::warp_mma;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBackWarps = 16;  // chunk_backward's
constexpr int kBackThreads = kBackWarps * 32;
constexpr size_t kMaxSmem = 200 * 1024;      // chunk_sums', of the H100's 227 KiB per block
constexpr size_t kMaxBackSmem = 227 * 1024;  // chunk_backward's: all of it (one block an SM)

struct SumsSmem {
  int ldv, ldk;
  __host__ __device__ static SumsSmem of(const Geometry& g) {
    return {pitch(g.Pp, 8), pitch(g.Np, 8)};
  }
  __host__ __device__ size_t bytes() const {
    return (size_t(kRows) * (ldv + ldk) + 2 * kRows) * sizeof(float);
  }
};

template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 4)  // 4 blocks an SM, as its shared memory allows
    chunk_sums_kernel(SsdScanBackwardLaunch a, Geometry geo) {
  extern __shared__ float smem[];
  const SumsSmem lay = SumsSmem::of(geo);
  float* sV = smem;                  // 64 x P: x or dy, rows weighted
  float* sK = sV + kRows * lay.ldv;  // 64 x N: B or C
  float* dt = sK + kRows * lay.ldk;
  float* cs = dt + kRows;
  const Chunk k = chunk_of(a, geo);
  const bool grad = blockIdx.y == 1;
  // The views' fields picked by value (a reference to either parameter
  // would put the parameters in local memory).
  const float* vp = grad ? a.dy.p : a.x.p;
  const int64_t vs = grad ? a.dy.stride : a.x.stride;
  const float* kp = grad ? a.C.p : a.Bm.p;
  const int64_t ks = grad ? a.C.stride : a.Bm.stride;
  load_rows(sV, lay.ldv, vp + k.row0 * vs + k.h * geo.P, vs, k.len, kRows, geo.P, geo.Pp,
            grad ? geo.vec_dy : geo.vec_x);
  load_rows(sK, lay.ldk, kp + k.row0 * ks + k.g * geo.N, ks, k.len, kRows, geo.N, geo.Np,
            grad ? geo.vec_C : geo.vec_B);
  wait_async();
  // One TF32 product: K rounded by each thread's own pieces before
  // load_decay's barrier, V when weighted, so that fragments are plain loads.
  constexpr bool kR = !kSplit;
  if constexpr (kR) tiles::round_rows(sK, lay.ldk, kRows, geo.Np, grad ? geo.vec_C : geo.vec_B);
  load_decay(a, k, dt, cs);
  const float last = cs[k.len - 1];
  // Row t weighted by exp(cs_last - cs_t) dt_t (a source's weight at the
  // chunk's end) or exp(cs_t) (the start state's weight at output t).
  const int warp = threadIdx.x / 32;
  for (int t = warp; t < k.len; t += kWarps) {
    const float w = grad ? expf(cs[t]) : expf(last - cs[t]) * dt[t];
    for (int p = threadIdx.x % 32; p < geo.P; p += 32) {
      const float v = sV[t * lay.ldv + p] * w;
      sV[t * lay.ldv + p] = kR ? tiles::round_tf32(v) : v;
    }
  }
  __syncthreads();
  // (P x N) = V^T (P x 64) K (64 x N), over the chunk's steps only.
  const int mt = geo.Pp / 16, nt = (geo.Np + kTileCols - 1) / kTileCols;
  const int K = static_cast<int>(round_up(k.len, 8));
  float* out = (grad ? a.dstates : a.states) + k.slot * geo.P * geo.N;
  for (int item = warp; item < mt * nt; item += kWarps) {
    const int m0 = (item % mt) * 16, n0 = (item / mt) * kTileCols;
    Acc acc;
    tiles::zero(acc);
    warp_mma<kSplit, kR, kR>(acc, Smem{sV, 1, lay.ldv}, Smem{sK, lay.ldk, 1}, 0, K, m0, n0, geo.Np);
    for_each_acc(m0, n0, geo.Np, [&](int p, int n, int j, int e) {
      if (p < geo.P && n < geo.N) out[int64_t{p} * geo.N + n] = acc[j][e];
    });
  }
  if (!grad && threadIdx.x == 0) a.decay[k.slot] = expf(last);
}

// C B^T of a (b, chunk, group), raw (the decay mask is per head): a block
// each, once for all the heads of the group, which chunk_backward reads
// instead of making it per head. Its tiles as chunk_backward's M1 (the
// same products in the same order, so the same bits), every entry written.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) chunk_cb_kernel(SsdScanBackwardLaunch a, Geometry geo) {
  extern __shared__ float smem[];
  const int ldn = pitch(geo.Np, 4);
  float* sB = smem;
  float* sC = sB + kRows * ldn;
  const int64_t c = blockIdx.x % geo.chunks, g = (blockIdx.x / geo.chunks) % a.G,
                b = blockIdx.x / (geo.chunks * a.G);
  const int64_t row0 = b * a.L + c * kRows;
  const int len = static_cast<int>(min(int64_t{kRows}, a.L - c * kRows)), N = geo.N;
  load_rows(sB, ldn, a.Bm.p + row0 * a.Bm.stride + g * N, a.Bm.stride, len, kRows, N, geo.Np,
            geo.vec_B);
  load_rows(sC, ldn, a.C.p + row0 * a.C.stride + g * N, a.C.stride, len, kRows, N, geo.Np,
            geo.vec_C);
  wait_async();
  constexpr bool kR = !kSplit;
  if constexpr (kR) {
    tiles::round_rows(sB, ldn, kRows, geo.Np, geo.vec_B);
    tiles::round_rows(sC, ldn, kRows, geo.Np, geo.vec_C);
  }
  __syncthreads();
  float* out = a.cb + blockIdx.x * int64_t{kRows * kRows};
  constexpr int kMt = kRows / 16, kNt = kRows / kTileCols;
  for (int it = threadIdx.x / 32; it < kMt * kNt; it += kWarps) {
    const int m0 = (it % kMt) * 16, n0 = (it / kMt) * kTileCols;
    Acc acc;
    tiles::zero(acc);
    warp_mma<kSplit, kR, kR>(acc, Smem{sC, ldn, 1}, Smem{sB, 1, ldn}, 0, geo.Np, m0, n0, m0 + 16);
    for_each_acc(m0, n0, kRows,
                 [&](int tp, int t, int j, int e) { out[tp * kRows + t] = acc[j][e]; });
  }
}

// The backward kernel's shared memory: x, dy (64 x P), B, C (64 x N), F
// and S0 (P x N), M1, M2 and M2 diag(dt) (64 x 64), per step dt, cs and the
// two decays, the row sums of x . dS B per 32 columns, the row sums of
// C . dC^h and -B . dB^h per 32 columns, and the dD reduction per warp:
// 224 KiB at P = 64, N = 128, so that every operand is loaded at the start
// and the three products run in one phase.
struct BackSmem {
  int ldx, ldn, ldm, col_items, n_items;
  __host__ __device__ static BackSmem of(const Geometry& g) {
    return {pitch(g.Pp, 4), pitch(g.Np, 4), pitch(kRows, 8), (g.Pp + kTileCols - 1) / kTileCols,
            (g.Np + kTileCols - 1) / kTileCols};
  }
  __host__ __device__ size_t floats(const Geometry& g) const {
    return size_t(kRows) * (2 * ldx + 2 * ldn + 3 * ldm + 4 + col_items + 2 * n_items) +
           2 * size_t(g.Pp) * ldn + kBackWarps;
  }
};

// A block per (b, h, chunk), 16 warps (one block a multiprocessor: twice
// the warps of 8 to hide the latencies of the fragment loads and the
// mma chains). Phases: every load (cp.async), M1 and M2, then the 8 + 16 +
// 16 warp items of dS B, dB^h and dC^h together, then the per-step sums.
template <bool kSplit>
__global__ void __launch_bounds__(kBackThreads)
    chunk_backward_kernel(SsdScanBackwardLaunch a, Geometry geo) {
  extern __shared__ float smem[];
  const BackSmem lay = BackSmem::of(geo);
  float* sx = smem;
  float* sdy = sx + kRows * lay.ldx;
  float* sB = sdy + kRows * lay.ldx;
  float* sC = sB + kRows * lay.ldn;
  float* sF = sC + kRows * lay.ldn;    // F (rows p, columns n)
  float* sS0 = sF + geo.Pp * lay.ldn;  // S0 (rows p, columns n)
  float* M1 = sS0 + geo.Pp * lay.ldn;  // (t', t): exp(cs_t' - cs_t) C_t'.B_t, t' >= t
  float* M2 = M1 + kRows * lay.ldm;    // (t', t): exp(cs_t' - cs_t) dy_t'.x_t, t' >= t
  float* M2dt = M2 + kRows * lay.ldm;  // (t', t): M2 dt_t
  float* dt = M2dt + kRows * lay.ldm;
  float* cs = dt + kRows;
  float* eL = cs + kRows;    // exp(cs_last - cs_t)
  float* eS = eL + kRows;    // exp(cs_t)
  float* part = eS + kRows;  // (column item, t): sum over its columns of x . dS B
  // (item, t): C . dC^h, then -B . dB^h, per 32 columns.
  float* gpart = part + kRows * lay.col_items;
  float* red = gpart + 2 * kRows * lay.n_items;  // kBackWarps: dD
  const Chunk k = chunk_of(a, geo);
  const int P = geo.P, N = geo.N, len = k.len;
  load_rows(sx, lay.ldx, a.x.p + k.row0 * a.x.stride + k.h * P, a.x.stride, len, kRows, P, geo.Pp,
            geo.vec_x);
  load_rows(sdy, lay.ldx, a.dy.p + k.row0 * a.dy.stride + k.h * P, a.dy.stride, len, kRows, P,
            geo.Pp, geo.vec_dy);
  load_rows(sB, lay.ldn, a.Bm.p + k.row0 * a.Bm.stride + k.g * N, a.Bm.stride, len, kRows, N,
            geo.Np, geo.vec_B);
  load_rows(sC, lay.ldn, a.C.p + k.row0 * a.C.stride + k.g * N, a.C.stride, len, kRows, N, geo.Np,
            geo.vec_C);
  load_rows(sF, lay.ldn, a.dstates + k.slot * P * N, N, P, geo.Pp, N, geo.Np, geo.vec_state);
  load_rows(sS0, lay.ldn, a.states + k.slot * P * N, N, P, geo.Pp, N, geo.Np, geo.vec_state);
  if (a.cb)
    load_rows(M1, lay.ldm, a.cb + k.cb * kRows * kRows, kRows, kRows, kRows, kRows, kRows,
              geo.vec_cb);
  wait_async();
  // One TF32 product: the operands other than x and dy (which the per-step
  // sums dD, D dy and x . dS B read as they are) rounded once here, each
  // thread its own pieces before load_decay's barrier, so that their
  // fragments are plain loads.
  constexpr bool kR = !kSplit;
  if constexpr (kR) {
    tiles::round_rows(sB, lay.ldn, kRows, geo.Np, geo.vec_B);
    tiles::round_rows(sC, lay.ldn, kRows, geo.Np, geo.vec_C);
    tiles::round_rows(sF, lay.ldn, geo.Pp, geo.Np, geo.vec_state);
    tiles::round_rows(sS0, lay.ldn, geo.Pp, geo.Np, geo.vec_state);
  }
  const auto staged = [](float v) { return kR ? tiles::round_tf32(v) : v; };
  load_decay(a, k, dt, cs);
  chunk_step_weights(cs, len, eL, eS);
  const int warp = threadIdx.x / 32;
  constexpr int kMt = kRows / 16, kNt = kRows / kTileCols;
  // M1 and M2: tiles right of the diagonal block are all masked.
  for (int item = warp; item < 2 * kMt * kNt; item += kBackWarps) {
    const bool second = item >= kMt * kNt;
    const int it = item % (kMt * kNt), m0 = (it % kMt) * 16, n0 = (it / kMt) * kTileCols;
    Acc acc;
    tiles::zero(acc);
    if (second)
      warp_mma<kSplit>(acc, Smem{sdy, lay.ldx, 1}, Smem{sx, 1, lay.ldx}, 0, geo.Pp, m0, n0,
                       m0 + 16);
    else if (!a.cb)
      warp_mma<kSplit, kR, kR>(acc, Smem{sC, lay.ldn, 1}, Smem{sB, 1, lay.ldn}, 0, geo.Np, m0, n0,
                               m0 + 16);
    for_each_acc(m0, n0, kRows, [&](int tp, int t, int j, int e) {
      // With a.cb, M1 holds C B^T as loaded; each entry is read and
      // written by one lane.
      const float raw = second || !a.cb ? acc[j][e] : M1[tp * lay.ldm + t];
      const float v = t <= tp && tp < len ? raw * expf(cs[tp] - cs[t]) : 0.f;
      (second ? M2 : M1)[tp * lay.ldm + t] = staged(v);
      if (second) M2dt[tp * lay.ldm + t] = staged(v * dt[t]);
    });
  }
  warp_dd_part(sdy, lay.ldx, sx, lay.ldx, len, P, red);
  __syncthreads();
  const float Dh = a.D ? a.D[k.h] : 0.f;
  const int K = static_cast<int>(round_up(len, 8));  // steps that can be nonzero
  const int nt = (geo.Np + kTileCols - 1) / kTileCols;
  const int na = kMt * lay.col_items, nb = kMt * nt;
  for (int item = warp; item < na + 2 * nb; item += kBackWarps) {
    Acc acc, acc_m;
    tiles::zero(acc);
    tiles::zero(acc_m);
    if (item < na) {  // dS B (t, p) -> dx, and the row sums of x . dS B
      const int m0 = (item % kMt) * 16, ci = item / kMt, n0 = ci * kTileCols;
      warp_mma<kSplit, kR, kR>(acc, Smem{sB, lay.ldn, 1}, Smem{sF, 1, lay.ldn}, 0, geo.Np, m0, n0,
                               geo.Pp);
      warp_mma<kSplit, kR>(acc_m, Smem{M1, 1, lay.ldm}, Smem{sdy, lay.ldx, 1}, m0, K, m0, n0,
                           geo.Pp);
      float rows[2] = {0.f, 0.f};  // this lane's rows m0 + g and m0 + g + 8
      for_each_acc(m0, n0, geo.Pp, [&](int t, int p, int j, int e) {
        const float v = eL[t] * acc[j][e] + acc_m[j][e];
        rows[e / 2] += sx[t * lay.ldx + p] * v;
        if (t < len && p < P)
          a.dx.p[(k.row0 + t) * a.dx.stride + k.h * P + p] = dt[t] * v + Dh * sdy[t * lay.ldx + p];
      });
      row_sums(rows, part + ci * kRows + m0);
    } else if (item < na + nb) {  // dB^h (t, n)
      const int ib = item - na, m0 = (ib % kMt) * 16, n0 = (ib / kMt) * kTileCols;
      warp_mma<kSplit, false, kR>(acc, Smem{sx, lay.ldx, 1}, Smem{sF, lay.ldn, 1}, 0, geo.Pp, m0,
                                  n0, geo.Np);
      warp_mma<kSplit, kR, kR>(acc_m, Smem{M2, 1, lay.ldm}, Smem{sC, lay.ldn, 1}, m0, K, m0, n0,
                               geo.Np);
      float rows[2] = {0.f, 0.f};  // -B . dB^h over this lane's columns of rows m0 + g, m0 + g + 8
      for_each_acc(m0, n0, geo.Np, [&](int t, int n, int j, int e) {
        if (t < len && n < N) {
          const float v = dt[t] * (eL[t] * acc[j][e] + acc_m[j][e]);
          a.dBh[((k.row0 + t) * a.H + k.h) * N + n] = v;
          rows[e / 2] -= a.Bm.p[(k.row0 + t) * a.Bm.stride + k.g * N + n] * v;
        }
      });
      row_sums(rows, gpart + (lay.n_items + ib / kMt) * kRows + m0);
    } else {  // dC^h (t, n)
      const int ic = item - na - nb, m0 = (ic % kMt) * 16, n0 = (ic / kMt) * kTileCols;
      warp_mma<kSplit, false, kR>(acc, Smem{sdy, lay.ldx, 1}, Smem{sS0, lay.ldn, 1}, 0, geo.Pp, m0,
                                  n0, geo.Np);
      warp_mma<kSplit, kR, kR>(acc_m, Smem{M2dt, lay.ldm, 1}, Smem{sB, lay.ldn, 1}, 0,
                               min(m0 + 16, K), m0, n0, geo.Np);
      float rows[2] = {0.f, 0.f};  // C . dC^h
      for_each_acc(m0, n0, geo.Np, [&](int t, int n, int j, int e) {
        if (t < len && n < N) {
          const float v = eS[t] * acc[j][e] + acc_m[j][e];
          a.dCh[((k.row0 + t) * a.H + k.h) * N + n] = v;
          rows[e / 2] += a.C.p[(k.row0 + t) * a.C.stride + k.g * N + n] * v;
        }
      });
      row_sums(rows, gpart + (ic / kMt) * kRows + m0);
    }
  }
  __syncthreads();  // the partial row sums are done
  write_step_sums(a, k, len, part, lay.col_items, gpart, lay.n_items, red, kBackWarps);
}

size_t sums_bytes(const Geometry& g) { return SumsSmem::of(g).bytes(); }
size_t cb_bytes(const Geometry& g) { return size_t(2) * kRows * pitch(g.Np, 4) * sizeof(float); }
size_t backward_bytes(const Geometry& g) { return BackSmem::of(g).floats(g) * sizeof(float); }

void launch_cb(const SsdScanBackwardLaunch& a, const Geometry& geo, cudaStream_t s) {
  if (!a.cb) return;
  const unsigned cb_grid = static_cast<unsigned>(a.B * a.G * geo.chunks);
  if (a.split)
    chunk_cb_kernel<true><<<cb_grid, kThreads, cb_bytes(geo), s>>>(a, geo);
  else
    chunk_cb_kernel<false><<<cb_grid, kThreads, cb_bytes(geo), s>>>(a, geo);
}

// Above 48 KiB a kernel's dynamic shared memory must be allowed first: one
// place allows every kernel here, whichever launcher runs first.
void allow_large_smem() {
  static const bool allowed = [] {
    for (const void* f : {reinterpret_cast<const void*>(chunk_sums_kernel<true>),
                          reinterpret_cast<const void*>(chunk_sums_kernel<false>),
                          reinterpret_cast<const void*>(chunk_cb_kernel<true>),
                          reinterpret_cast<const void*>(chunk_cb_kernel<false>)})
      cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kMaxSmem});
    for (const void* f : {reinterpret_cast<const void*>(chunk_backward_kernel<true>),
                          reinterpret_cast<const void*>(chunk_backward_kernel<false>)})
      cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kMaxBackSmem});
    return true;
  }();
  (void)allowed;
}

}  // namespace

bool ssd_backward_tiles_fit(int64_t P, int64_t N) {
  if (P < 1 || N < 1 || P > 4096 || N > 4096) return false;
  SsdScanBackwardLaunch a{};
  a.P = P;
  a.N = N;
  const Geometry g = geometry_of(a);
  return sums_bytes(g) <= kMaxSmem && cb_bytes(g) <= kMaxSmem && backward_bytes(g) <= kMaxBackSmem;
}

int64_t ssd_backward_cb_floats(int64_t B, int64_t L, int64_t G) {
  return B * G * ((L + kRows - 1) / kRows) * kRows * kRows;
}

void launch_ssd_chunk_sums_tiles(const SsdScanBackwardLaunch& a, cudaStream_t s) {
  const Geometry geo = geometry_of(a);
  allow_large_smem();
  const dim3 grid(static_cast<unsigned>(a.B * a.H * geo.chunks), 2);
  if (a.split)
    chunk_sums_kernel<true><<<grid, kThreads, sums_bytes(geo), s>>>(a, geo);
  else
    chunk_sums_kernel<false><<<grid, kThreads, sums_bytes(geo), s>>>(a, geo);
  launch_cb(a, geo, s);
}

void launch_ssd_chunk_backward_tiles(const SsdScanBackwardLaunch& a, cudaStream_t s) {
  const Geometry geo = geometry_of(a);
  allow_large_smem();
  const unsigned grid = static_cast<unsigned>(a.B * a.H * geo.chunks);
  if (a.split)
    chunk_backward_kernel<true><<<grid, kBackThreads, backward_bytes(geo), s>>>(a, geo);
  else
    chunk_backward_kernel<false><<<grid, kBackThreads, backward_bytes(geo), s>>>(a, geo);
}

}  // namespace ssm::cuda
