// chunk_backward (ssd_scan_backward_tiles.cu, whose header gives the math)
// with FP16 operands, opt-in (SSM_CUDA_SSD_BACKWARD_F16=1) in the rounding
// mode (SsdScanBackwardLaunch::split false): every operand staged in shared
// memory as FP16 with a power-of-two scale of its own (f16_warp_tiles.h),
// so that products round as the TF32 kernel's (10 mantissa bits) but for
// values more than 2^28 below their operand's largest; mma.sync m16n8k16
// with ldmatrix fragment loads; half the TF32 kernel's shared memory
// (107.8 KiB at P 64, N 128: two blocks a multiprocessor) and 8 warps a
// block. The per-step sums (dD, D dy, x . dS B, g) read x, dy, B and C as
// they are (F32, from global memory: L2 for the heads of a group), in
// fixed orders as the TF32 kernel's, so results repeat bit for bit.
//
// Each operand's scale needs its largest magnitude first: each thread holds
// its pieces of the operands in registers across the barrier that gathers
// their maxima (so P <= 64, N <= 128: the Mamba-2 models' 64 and 128), and
// M1, M2, M2 diag(dt) likewise when made.
#include <algorithm>

#include "ops/cuda/f16_mma.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/ssd_backward_chunk.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"
// After its primitives (f16_mma.h) and tiles' helpers.
#include "ops/cuda/f16_warp_tiles.h"

namespace ssm::cuda {
namespace {

using f16tiles::at;
using f16tiles::block_max;
using f16tiles::Half16;
using f16tiles::half_pitch;
using f16tiles::HeldRows;
using f16tiles::pow2;
using f16tiles::scale_exp;
using f16tiles::store_pair;
using f16tiles::warp_max_to;
using f16tiles::warp_mma_f16;
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
using tiles::round_up;

constexpr int kWarps = 8;  // two blocks a multiprocessor: 16 warps, as the TF32 kernel's one
constexpr int kThreads = kWarps * 32;
constexpr size_t kMaxSmem = 227 * 1024;
constexpr int kMt = kRows / 16, kNt = kRows / kTileCols;
static_assert(kMt * kNt == kWarps, "M1 and M2: one item a warp");
// The operands' rows held in registers (HeldRows) fit for P <= 64 and
// N <= 128 (the TF32 kernel runs the others): runs of 4 of 64 x 64 (x, dy)
// and of 64 x 128 (B, C, F, S0) a thread.
constexpr int kMaxP = 64, kMaxN = 128;
constexpr int kRunsP = kRows * kMaxP / 4 / kThreads, kRunsN = kRows * kMaxN / 4 / kThreads;

// The staged operands, each with its own scale.
enum Operand { kX, kDy, kB, kC, kF, kS0, kM1, kM2, kM2dt, kOperands };

// Shared memory: FP16 x, dy (64 x P), B, C (64 x N), F, S0 (P x N), M1, M2,
// M2 diag(dt) (64 x 64), then floats: per step dt, cs and the two decays,
// x . dS B's row sums per 32 columns, C . dC^h and -B . dB^h's per 32
// columns, dD per warp and each operand's maximum per warp.
struct F16Smem {
  int wp, wn, col_items, n_items;
  __host__ __device__ static F16Smem of(const Geometry& g) {
    return {half_pitch(g.Pp), half_pitch(g.Np), (g.Pp + kTileCols - 1) / kTileCols,
            (g.Np + kTileCols - 1) / kTileCols};
  }
  __host__ __device__ size_t halves(const Geometry& g) const {
    return size_t(kRows) * (2 * wp + 2 * wn + 3 * kRows) + 2 * size_t(g.Pp) * wn;
  }
  __host__ __device__ size_t floats() const {
    return size_t(kRows) * (4 + col_items + 2 * n_items) + kWarps * (1 + kOperands);
  }
  __host__ __device__ size_t bytes(const Geometry& g) const {
    return halves(g) * sizeof(uint16_t) + floats() * sizeof(float);
  }
};

// A block per (b, h, chunk). Phases: the operands' maxima, the decay, the
// operands staged; M1 (from chunk_cb's C B^T) and M2 made and staged; then
// the 8 + 16 + 16 warp items of dS B, dB^h and dC^h; then the per-step sums.
__global__ void __launch_bounds__(kThreads, 2)
    chunk_backward_f16_kernel(SsdScanBackwardLaunch a, Geometry geo) {
  extern __shared__ uint4 smem_f16[];  // 16-byte aligned: ldmatrix rows
  const F16Smem lay = F16Smem::of(geo);
  uint16_t* sx = reinterpret_cast<uint16_t*>(smem_f16);
  uint16_t* sdy = sx + kRows * lay.wp;
  uint16_t* sB = sdy + kRows * lay.wp;
  uint16_t* sC = sB + kRows * lay.wn;
  uint16_t* sF = sC + kRows * lay.wn;    // F (rows p, columns n)
  uint16_t* sS0 = sF + geo.Pp * lay.wn;  // S0 (rows p, columns n)
  uint16_t* M1 = sS0 + geo.Pp * lay.wn;  // (t', t): exp(cs_t' - cs_t) C_t'.B_t, t' >= t
  uint16_t* M2 = M1 + kRows * kRows;     // (t', t): exp(cs_t' - cs_t) dy_t'.x_t, t' >= t
  uint16_t* M2dt = M2 + kRows * kRows;   // (t', t): M2 dt_t
  float* dt = reinterpret_cast<float*>(M2dt + kRows * kRows);
  float* cs = dt + kRows;
  float* eL = cs + kRows;    // exp(cs_last - cs_t)
  float* eS = eL + kRows;    // exp(cs_t)
  float* part = eS + kRows;  // (column item, t): sum over its columns of x . dS B
  // (item, t): C . dC^h, then -B . dB^h, per 32 columns.
  float* gpart = part + kRows * lay.col_items;
  float* red = gpart + 2 * kRows * lay.n_items;  // kWarps: dD
  float* maxima = red + kWarps;                  // (operand, warp)
  const Chunk k = chunk_of(a, geo);
  const int P = geo.P, N = geo.N, len = k.len;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* xg = a.x.p + k.row0 * a.x.stride + k.h * P;
  const float* dyg = a.dy.p + k.row0 * a.dy.stride + k.h * P;
  const float* Bg = a.Bm.p + k.row0 * a.Bm.stride + k.g * N;
  const float* Cg = a.C.p + k.row0 * a.C.stride + k.g * N;
  const float* Fg = a.dstates + k.slot * P * N;
  const float* S0g = a.states + k.slot * P * N;
  // Held in three groups of at most 64 registers a thread (all six at once
  // spill), each while its maxima gather: x, dy, B (load_decay's barrier),
  // C, F, then S0.
  int e[kOperands];  // the scale exponents
  {
    HeldRows<kRunsP> hx, hdy;
    HeldRows<kRunsN> hB;
    warp_max_to(hx.load(xg, a.x.stride, len, P, lay.wp, geo.vec_x), maxima + kX * kWarps);
    warp_max_to(hdy.load(dyg, a.dy.stride, len, P, lay.wp, geo.vec_dy), maxima + kDy * kWarps);
    warp_max_to(hB.load(Bg, a.Bm.stride, len, N, lay.wn, geo.vec_B), maxima + kB * kWarps);
    load_decay(a, k, dt, cs);  // its barrier: the maxima are in
    for (int o = kX; o <= kB; ++o) e[o] = scale_exp(block_max(maxima + o * kWarps));
    hx.stage(sx, kRows, lay.wp, pow2(e[kX]));
    hdy.stage(sdy, kRows, lay.wp, pow2(e[kDy]));
    hB.stage(sB, kRows, lay.wn, pow2(e[kB]));
  }
  {
    HeldRows<kRunsN> hC, hF;
    warp_max_to(hC.load(Cg, a.C.stride, len, N, lay.wn, geo.vec_C), maxima + kC * kWarps);
    warp_max_to(hF.load(Fg, N, P, N, lay.wn, geo.vec_state), maxima + kF * kWarps);
    __syncthreads();
    for (int o = kC; o <= kF; ++o) e[o] = scale_exp(block_max(maxima + o * kWarps));
    hC.stage(sC, kRows, lay.wn, pow2(e[kC]));
    hF.stage(sF, geo.Pp, lay.wn, pow2(e[kF]));
  }
  {
    HeldRows<kRunsN> hS0;
    warp_max_to(hS0.load(S0g, N, P, N, lay.wn, geo.vec_state), maxima + kS0 * kWarps);
    __syncthreads();
    e[kS0] = scale_exp(block_max(maxima + kS0 * kWarps));
    hS0.stage(sS0, geo.Pp, lay.wn, pow2(e[kS0]));
  }
  chunk_step_weights(cs, len, eL, eS);
  __syncthreads();
  // M1 and M2, a warp item each (16 x 32): tiles right of the diagonal
  // block are all masked. M1 is chunk_cb's C B^T (the TF32 product, as the
  // TF32 kernel reads it), M2 the FP16 product here; both F32 until staged.
  {
    const int m0 = (warp % kMt) * 16, n0 = (warp / kMt) * kTileCols;
    Acc m1, m2, m2dt;
    tiles::zero(m2);
    warp_mma_f16<false, false>(m2, Half16{sdy, lay.wp}, Half16{sx, lay.wp}, 0, geo.Pp, m0, n0,
                               m0 + 16);
    const float u = pow2(-(e[kDy] + e[kX]));
    const float* cb = a.cb + k.cb * kRows * kRows;
    float mx[3] = {0.f, 0.f, 0.f};
    for_each_acc(m0, n0, kRows, [&](int tp, int t, int j, int i) {
      const bool in = t <= tp && tp < len;
      const float d = in ? expf(cs[tp] - cs[t]) : 0.f;
      m1[j][i] = in ? cb[tp * kRows + t] * d : 0.f;
      m2[j][i] = in ? m2[j][i] * u * d : 0.f;
      m2dt[j][i] = m2[j][i] * dt[t];
      mx[0] = fmaxf(mx[0], fabsf(m1[j][i]));
      mx[1] = fmaxf(mx[1], fabsf(m2[j][i]));
      mx[2] = fmaxf(mx[2], fabsf(m2dt[j][i]));
    });
    for (int o = 0; o < 3; ++o) warp_max_to(mx[o], maxima + (kM1 + o) * kWarps);
    __syncthreads();
    for (int o = kM1; o <= kM2dt; ++o) e[o] = scale_exp(block_max(maxima + o * kWarps));
    const float s1 = pow2(e[kM1]), s2 = pow2(e[kM2]), s3 = pow2(e[kM2dt]);
    const int g = lane / 4, tg = lane % 4;
#pragma unroll
    for (int j = 0; j < kTileCols / 8; ++j) {
      const int c = n0 + 8 * j + 2 * tg;
      for (int h = 0; h < 2; ++h) {  // rows m0 + g, m0 + g + 8
        const int r = m0 + g + 8 * h;
        store_pair(M1, kRows, r, c, m1[j][2 * h] * s1, m1[j][2 * h + 1] * s1);
        store_pair(M2, kRows, r, c, m2[j][2 * h] * s2, m2[j][2 * h + 1] * s2);
        store_pair(M2dt, kRows, r, c, m2dt[j][2 * h] * s3, m2dt[j][2 * h + 1] * s3);
      }
    }
  }
  warp_dd_part(dyg, a.dy.stride, xg, a.x.stride, len, P, red);  // F32, as loaded
  __syncthreads();  // M1, M2, M2dt staged
  const float Dh = a.D ? a.D[k.h] : 0.f;
  const int K = static_cast<int>(round_up(len, 16));  // steps that can be nonzero
  const int nt = (geo.Np + kTileCols - 1) / kTileCols;
  const int na = kMt * lay.col_items, nb = kMt * nt;
  for (int item = warp; item < na + 2 * nb; item += kWarps) {
    Acc acc, acc_m;
    tiles::zero(acc);
    tiles::zero(acc_m);
    if (item < na) {  // dS B (t, p) -> dx, and the row sums of x . dS B
      const int m0 = (item % kMt) * 16, ci = item / kMt, n0 = ci * kTileCols;
      warp_mma_f16<false, false>(acc, Half16{sB, lay.wn}, Half16{sF, lay.wn}, 0, geo.Np, m0, n0,
                                 geo.Pp);
      warp_mma_f16<true, true>(acc_m, Half16{M1, kRows}, Half16{sdy, lay.wp}, m0, K, m0, n0,
                               geo.Pp);
      const float ua = pow2(-(e[kB] + e[kF])), um = pow2(-(e[kM1] + e[kDy]));
      float rows[2] = {0.f, 0.f};  // this lane's rows m0 + g and m0 + g + 8
      for_each_acc(m0, n0, geo.Pp, [&](int t, int p, int j, int i) {
        const float v = eL[t] * (acc[j][i] * ua) + acc_m[j][i] * um;
        if (t < len && p < P) {
          rows[i / 2] += xg[t * a.x.stride + p] * v;
          a.dx.p[(k.row0 + t) * a.dx.stride + k.h * P + p] =
              dt[t] * v + Dh * dyg[t * a.dy.stride + p];
        }
      });
      row_sums(rows, part + ci * kRows + m0);
    } else if (item < na + nb) {  // dB^h (t, n)
      const int ib = item - na, m0 = (ib % kMt) * 16, n0 = (ib / kMt) * kTileCols;
      warp_mma_f16<false, true>(acc, Half16{sx, lay.wp}, Half16{sF, lay.wn}, 0, geo.Pp, m0, n0,
                                geo.Np);
      warp_mma_f16<true, true>(acc_m, Half16{M2, kRows}, Half16{sC, lay.wn}, m0, K, m0, n0, geo.Np);
      const float ua = pow2(-(e[kX] + e[kF])), um = pow2(-(e[kM2] + e[kC]));
      float rows[2] = {0.f, 0.f};  // -B . dB^h over this lane's columns of rows m0 + g, m0 + g + 8
      for_each_acc(m0, n0, geo.Np, [&](int t, int n, int j, int i) {
        if (t < len && n < N) {
          const float v = dt[t] * (eL[t] * (acc[j][i] * ua) + acc_m[j][i] * um);
          a.dBh[((k.row0 + t) * a.H + k.h) * N + n] = v;
          rows[i / 2] -= Bg[t * a.Bm.stride + n] * v;
        }
      });
      row_sums(rows, gpart + (lay.n_items + ib / kMt) * kRows + m0);
    } else {  // dC^h (t, n)
      const int ic = item - na - nb, m0 = (ic % kMt) * 16, n0 = (ic / kMt) * kTileCols;
      warp_mma_f16<false, true>(acc, Half16{sdy, lay.wp}, Half16{sS0, lay.wn}, 0, geo.Pp, m0, n0,
                                geo.Np);
      warp_mma_f16<false, true>(acc_m, Half16{M2dt, kRows}, Half16{sB, lay.wn}, 0, min(m0 + 16, K),
                                m0, n0, geo.Np);
      const float ua = pow2(-(e[kDy] + e[kS0])), um = pow2(-(e[kM2dt] + e[kB]));
      float rows[2] = {0.f, 0.f};  // C . dC^h
      for_each_acc(m0, n0, geo.Np, [&](int t, int n, int j, int i) {
        if (t < len && n < N) {
          const float v = eS[t] * (acc[j][i] * ua) + acc_m[j][i] * um;
          a.dCh[((k.row0 + t) * a.H + k.h) * N + n] = v;
          rows[i / 2] += Cg[t * a.C.stride + n] * v;
        }
      });
      row_sums(rows, gpart + (ic / kMt) * kRows + m0);
    }
  }
  __syncthreads();  // the partial row sums are done
  write_step_sums(a, k, len, part, lay.col_items, gpart, lay.n_items, red, kWarps);
}

size_t f16_bytes(const Geometry& g) { return F16Smem::of(g).bytes(g); }

}  // namespace

bool ssd_backward_f16_fit(int64_t P, int64_t N) {
  if (P > kMaxP || N > kMaxN || !ssd_backward_tiles_fit(P, N)) return false;
  SsdScanBackwardLaunch a{};
  a.P = P;
  a.N = N;
  return f16_bytes(geometry_of(a)) <= kMaxSmem;
}

void launch_ssd_chunk_backward_f16(const SsdScanBackwardLaunch& a, cudaStream_t s) {
  const Geometry geo = geometry_of(a);
  // Above 48 KiB the kernel's shared memory must be allowed; all of the
  // multiprocessor's shared memory carved out, so that two blocks fit.
  static const bool allowed = [] {
    cudaFuncSetAttribute(chunk_backward_f16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int{kMaxSmem});
    cudaFuncSetAttribute(chunk_backward_f16_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                         100);
    return true;
  }();
  (void)allowed;
  const unsigned grid = static_cast<unsigned>(a.B * a.H * geo.chunks);
  chunk_backward_f16_kernel<<<grid, kThreads, f16_bytes(geo), s>>>(a, geo);
}

}  // namespace ssm::cuda
