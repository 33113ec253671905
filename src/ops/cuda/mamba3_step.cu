// mamba3_prepare_scan's decode step (L = 1) on the GPU in one kernel, a
// block per (sequence b, head h), where the two ops take five launches
// (mamba3_prepare.cu's rows, phase and heads kernels, mamba3_scan.cu's
// scan and last-step kernels): at batch 1 a launch costs about as much
// latency as its work, so a Mamba-3 decode layer is in_proj, this kernel,
// the output and out_proj. The block owns everything of its (b, h) that
// the step updates (its state rows, k_prev, v_prev and phase), so no block
// waits for another; each recomputes its group's B and C norms (2 R of
// them, a warp each), and the first head of a group writes them out (the
// first head of all the angle rates).
//
// The arithmetic is the two ops', expression for expression (the rows
// kernel's norms in double with a warp's shuffle tree, the heads kernel's
// rotation, the scan's step and sums from state_step_math.h), so that
// every output matches theirs to the bit; q, k and v stay in shared memory
// (the op leaves those tensors unspecified).
//
//   before griddepcontrol.wait  the block's state rows (first pass), k_prev,
//                               v_prev (into shared memory) and phase: only
//                               this layer's earlier steps wrote them
//   A  norms of B and C (warps), dt, A, lam (one thread), the phase step and
//      an angle's sine and cosine (a thread an angle), v = x mimo_x
//   B  q and k normed, biased and rotated, a thread a rotated pair or an
//      unrotated entry, in place over the normed C and B
//   C  the trapezoidal step of each state row, o = S q + D v; k_prev, v_prev
//      <- k, v.
#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/mamba3_scalars.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/state_memory.h"
#include "ops/cuda/state_step_math.h"

namespace ssm::cuda {
namespace {

// The rows a thread keeps for PER entries a row, and the most threads a
// block: at the 130m models' N 128 (16 slices of PER 8) 512 threads of two
// rows take a head's 64 rows in one pass, all loaded before the wait; 1024
// threads of one row (64 registers) spilled.
__host__ __device__ constexpr int rows_for(int PER) { return PER <= 8 ? 2 : 1; }
__host__ __device__ constexpr int max_threads(int PER) { return PER <= 16 ? 512 : 256; }

// Thread (pl, j) of a pass keeps state rows p0 + pl + w T / W (w <
// rows_for(PER)), entries n = j PER + e (W slices: the scan's scan_slices,
// and its order: state_step_math.h); a block of T threads takes rows_for(PER) T / W
// rows a pass. Rows past P compute row 0 and write nothing (every lane is in
// the shuffles).
template <int PER, class T>
__global__ void __launch_bounds__(max_threads(PER), 1) step_kernel(Mamba3PrepareLaunch a, Mamba3ScanLaunch s, int W,
                                                                bool stream) {
  let_next_kernel_start();
  extern __shared__ float smem[];
  const int N = static_cast<int>(a.N), P = static_cast<int>(a.P), R = static_cast<int>(a.R);
  const int Si = static_cast<int>(a.S), G = static_cast<int>(a.G), H = static_cast<int>(a.H);
  const int RN = R * N, RP = R * P;
  float* kp = smem;        // R x N: k_prev
  float* vp = kp + RN;     // R x P: v_prev
  float* qs = vp + RP;     // R x N: C normed, then q
  float* ks = qs + RN;     // R x N: B normed, then k
  float* vs = ks + RN;     // R x P: v
  float* cs = vs + RP;     // S: the angles' cosines
  float* sn = cs + Si;     // S: and sines
  float* sc = sn + Si;     // dt, A, lam, D
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int64_t bh = blockIdx.x, b = bh / H;
  const int h = static_cast<int>(bh % H), g = h / (H / G);
  constexpr int ROWS = rows_for(PER);
  const int stride = threads / W, rows_per_pass = ROWS * stride, pl = tid / W, j = tid % W;
  T* const ssm = static_cast<T*>(s.ssm.p);
  const auto load = [&](int64_t i) { return stream ? load_state<true>(ssm + i) : load_state<false>(ssm + i); };

  // The first pass's state rows, and k_prev, v_prev: this layer's earlier
  // steps wrote them (a step's kernels start once the previous step's
  // have finished), so they load while the kernel before finishes.
  float st[ROWS][PER];
  const auto live = [&](int p0, int w) { return p0 + pl + w * stride < P; };
  const auto row_of = [&](int p0, int w) { return live(p0, w) ? p0 + pl + w * stride : 0; };
  const auto load_rows = [&](int p0) {
#pragma unroll
    for (int w = 0; w < ROWS; ++w) {
      const int64_t p = row_of(p0, w);
#pragma unroll
      for (int e = 0; e < PER; ++e) {
        const int n = j * PER + e;
        st[w][e] = n < N && ssm ? load((bh * P + p) * N + n) : 0.f;
      }
    }
  };
  load_rows(0);
  if (ssm) {
    for (int i = tid; i < RN; i += threads) kp[i] = s.k_prev[bh * RN + i];
    for (int i = tid; i < RP; i += threads) vp[i] = s.v_prev[bh * RP + i];
  }
  const float entering = tid < Si ? a.phase[bh * Si + tid] : 0.f;
  wait_for_previous_kernel();  // in_proj's columns from here on

  // A. Warp w normalises block w of [B_0 .. B_R-1 C_0 .. C_R-1] of the
  // group (mamba3_prepare.cu's rows_kernel).
  const int lane = tid % 32, warps = threads / 32;
  const bool writes_norms = h % (H / G) == 0;
  for (int w = tid / 32; w < 2 * R; w += warps) {
    const bool is_C = w >= R;
    const int r = is_C ? w - R : w;
    const int64_t block = int64_t{r} * G + g;
    const ConstRows& src = is_C ? a.C : a.Bm;
    const float* in = src.p + b * src.stride + block * N;
    const float* nw = is_C ? a.C_norm : a.B_norm;
    double ss = 0;
    for (int n = lane; n < N; n += 32) ss += static_cast<double>(in[n]) * in[n];
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float sr = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(N) + a.norm_eps));
    float* dst = (is_C ? qs : ks) + r * N;
    float* out = (is_C ? a.C_normed : a.B_normed) + (b * R * G + block) * N;
    for (int n = lane; n < N; n += 32) {
      dst[n] = in[n] * sr * nw[n];
      if (writes_norms) out[n] = dst[n];
    }
  }
  const float dt = mamba3_softplus(a.ddt.p[b * a.ddt.stride + h] + a.dt_bias[h]);
  if (tid == 0) {
    const float A = fminf(-mamba3_heavy_tail(a.ddA.p[b * a.ddA.stride + h]), -a.A_floor);
    const float lam = mamba3_sigmoid(a.trap.p[b * a.trap.stride + h]);
    sc[0] = dt, sc[1] = A, sc[2] = lam, sc[3] = s.D ? s.D[h] : 0.f;
    a.dt[bh] = dt, a.A[bh] = A, a.lam[bh] = lam;
  }
  // The phase walk of one step (phase_kernel), the rotation's angle once.
  for (int jj = tid; jj < Si; jj += threads) {
    const float rate = kMamba3Pi * tanhf(a.ang.p[b * a.ang.stride + jj]);
    if (h == 0) a.ang_rate[b * Si + jj] = rate;
    const float adv = __fmul_rn(rate, dt);  // as phase_kernel's: rounded, never fused
    float phase = jj == tid ? entering : a.phase[bh * Si + jj];
    phase += adv;
    a.phase[bh * Si + jj] = phase;
    sincosf(phase, &sn[jj], &cs[jj]);
  }
  for (int i = tid; i < RP; i += threads) {
    const int r = i / P, p = i % P;
    const float x = a.x.p[b * a.x.stride + int64_t{h} * P + p];
    vs[i] = a.mimo_x ? x * a.mimo_x[(int64_t{h} * R + r) * P + p] : x;
  }
  __syncthreads();

  // B. q and k (the heads kernel's rotation): unit u < S of rank r is the
  // pair of angle u, the others an unrotated entry.
  const int half = N / 2, units = N - Si;
  for (int i = tid; i < R * units; i += threads) {
    const int r = i / units, u = i % units;
    const float* cb = a.C_bias + (int64_t{h} * R + r) * N;
    const float* bb = a.B_bias + (int64_t{h} * R + r) * N;
    float* q = qs + r * N;
    float* k = ks + r * N;
    if (u < Si) {
      const int n1 = a.halves ? u : 2 * u, n2 = a.halves ? u + half : 2 * u + 1;
      const float q1 = q[n1] + cb[n1], q2 = q[n2] + cb[n2];
      const float k1 = k[n1] + bb[n1], k2 = k[n2] + bb[n2];
      const float c = cs[u], sv = sn[u];  // (a, b) -> (a c - b s, a s + b c)
      // Products rounded (never fused), as the heads kernel's.
      q[n1] = __fmul_rn(q1, c) - __fmul_rn(q2, sv);
      k[n1] = __fmul_rn(k1, c) - __fmul_rn(k2, sv);
      q[n2] = __fmul_rn(q1, sv) + __fmul_rn(q2, c);
      k[n2] = __fmul_rn(k1, sv) + __fmul_rn(k2, c);
    } else {
      // Unrotated: adjacent pairs' [2S, N); halves' [S, N/2) and [N/2 + S, N).
      const int e = u - Si;
      const int n = !a.halves ? 2 * Si + e : (e < half - Si ? Si + e : 2 * Si + e);
      q[n] = q[n] + cb[n];
      k[n] = k[n] + bb[n];
    }
  }
  __syncthreads();

  // C. The scan's step (mamba3_scan.cu's scan_kernel at L = 1).
  const Mamba3Coefs c = mamba3_coefs(sc[0], sc[2], sc[1]);
  const float Dh = sc[3];
  const unsigned mask = 0xffffffffu;
  for (int p0 = 0; p0 < P; p0 += rows_per_pass) {
    if (p0 > 0) load_rows(p0);
#pragma unroll
    for (int w = 0; w < ROWS; ++w) {
      const int p = row_of(p0, w);
#pragma unroll
      for (int e = 0; e < PER; ++e) {
        const int n = j * PER + e;
        if (n < N) {
          // U_{t-1} (the scan keeps it from its prologue) and U_t.
          float up = 0.f, u = 0.f;
          if (ssm)
            for (int r = 0; r < R; ++r) up = rank_term(up, vp[r * P + p], kp[r * N + n]);
          for (int r = 0; r < R; ++r) u = rank_term(u, vs[r * P + p], ks[r * N + n]);
          st[w][e] = mamba3_entry(st[w][e], c, up, u);
        }
      }
      for (int r = 0; r < R; ++r) {
        const float acc = row_y<PER>(st[w], qs + r * N, j, N, mask, W);
        if (live(p0, w) && j == 0) s.o[(bh * R + r) * P + p] = y_out(acc, Dh, vs[r * P + p]);
      }
      if (ssm && live(p0, w)) {
#pragma unroll
        for (int e = 0; e < PER; ++e) {
          const int n = j * PER + e;
          if (n < N) {
            const int64_t at = (bh * P + p) * N + n;
            if (stream) store_state<true>(ssm + at, st[w][e]);
            else store_state<false>(ssm + at, st[w][e]);
          }
        }
      }
    }
  }
  // Every thread read k_prev and v_prev before A's barrier.
  if (ssm) {
    for (int i = tid; i < RN; i += threads) s.k_prev[bh * RN + i] = ks[i];
    for (int i = tid; i < RP; i += threads) s.v_prev[bh * RP + i] = vs[i];
  }
}

// The slices per state row, as mamba3_scan.cu's scan_slices: the fewest (a
// power of two, at most 32) that keep each thread's share within 8 entries.
int step_slices(int64_t N) {
  int W = 1;
  while (W < 32 && (N + W - 1) / W > 8) W *= 2;
  return W;
}

// A power of two >= the entries a thread keeps (scan_kernel's PER).
int64_t per_thread(int64_t N) {
  const int64_t need = (N + step_slices(N) - 1) / step_slices(N);
  int64_t per = 1;
  while (per < need) per *= 2;
  return per;
}

template <class T>
auto step_kernel_for(int64_t per) -> void (*)(Mamba3PrepareLaunch, Mamba3ScanLaunch, int, bool) {
  return per <= 1   ? step_kernel<1, T>
         : per <= 2 ? step_kernel<2, T>
         : per <= 4 ? step_kernel<4, T>
         : per <= 8 ? step_kernel<8, T>
         : per <= 16 ? step_kernel<16, T>
                     : step_kernel<32, T>;
}

int64_t step_smem(int64_t R, int64_t N, int64_t P, int64_t S) {
  return (3 * R * N + 2 * R * P + 2 * S + 4) * static_cast<int64_t>(sizeof(float));
}

}  // namespace

bool mamba3_step_fits(int64_t R, int64_t N, int64_t P, int64_t S) {
  return N >= 1 && N <= 1024 && step_smem(R, N, P, S) <= 48 * 1024;
}

void launch_mamba3_step(const Mamba3PrepareLaunch& a, const Mamba3ScanLaunch& s, cudaStream_t stream) {
  if (a.B * a.H == 0) return;
  const int W = step_slices(a.N);
  const int64_t per = per_thread(a.N);
  const int64_t rows = rows_for(static_cast<int>(per)), cap = max_threads(static_cast<int>(per));
  // A pass of every row where it fits; whole warps, at least two (the
  // norms take a warp each, the shuffles whole warps).
  const int64_t threads = std::max<int64_t>(64, std::min<int64_t>(cap, ((a.P + rows - 1) / rows * W + 31) / 32 * 32));
  // The state streamed past the caches where the step has many sequences
  // (mamba3_scan.cu streams from 512 blocks of 16 rows: the 130m models
  // from batch 6).
  const bool streamed = a.B * a.H * ((a.P + 15) / 16) >= 512;
  const auto kernel = s.ssm.bf16 ? step_kernel_for<__nv_bfloat16>(per) : step_kernel_for<float>(per);
  launch_overlapped(a.overlap, kernel, dim3(static_cast<unsigned>(a.B * a.H)), dim3(static_cast<unsigned>(threads)),
                    static_cast<size_t>(step_smem(a.R, a.N, a.P, a.S)), stream, a, s, W, streamed);
}

}  // namespace ssm::cuda
