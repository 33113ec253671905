// mamba3_prepare backward on the GPU, the stages of
// ref/mamba3_prepare_backward.cpp as simple kernels on the op's stream:
//   unrotate  a thread per (step, angle): dq and dk rotated back in place,
//             the angle's gradient of the step into dphase;
//   cumsum    a block per (b, h, 8 angles): dphase summed over t' >= t (the
//             phase is a running sum), in double, in segments of time;
//   steps     a thread per (b, h, t): dt (its own gradient and the phase's),
//             A under its floor, lam;
//   rates     a thread per (row, angle): the angle rates' gradient, summed
//             over the heads in order;
//   norms     a warp per (row, rank, group, B or C): the heads' dk (dq)
//             summed, then RMSNorm's backward;
//   v         a thread per element: per-row contributions of mimo_x, and
//             dx (the biases' gradients are dk's and dq's sums, made by the
//             host side with launch_sum_head_rows).
// Parameter gradients leave per-row contributions (launch_sum_rows sums
// them in a fixed order): no atomics, results repeat bit for bit.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/float_runs.h"
#include "ops/cuda/launch_mamba3_attention_backward.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kPi = 3.14159265358979323846f;

__device__ float softplus_of(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}
__device__ float sigmoid_of(float x) {
  return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x));
}
__device__ float heavy_tail(float v) { return v >= 0.f ? 1.f + v : 1.f / (1.f - v); }
__device__ float heavy_tail_grad(float v) { return v >= 0.f ? 1.f : 1.f / ((1.f - v) * (1.f - v)); }

__device__ float at(const ConstRows& m, int64_t row, int64_t col) {
  return m.p[row * m.stride + col];
}
__device__ float& at(const Rows& m, int64_t row, int64_t col) { return m.p[row * m.stride + col]; }

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// The pair (i0, i1) that angle j turns.
__device__ void pair_of(bool halves, int64_t N, int64_t j, int64_t& i0, int64_t& i1) {
  i0 = halves ? j : 2 * j;
  i1 = halves ? j + N / 2 : 2 * j + 1;
}

__global__ void unrotate_kernel(Mamba3PrepareBackwardLaunch a) {
  const int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (u >= a.B * a.H * a.L * a.S) return;
  const int64_t step = u / a.S, j = u % a.S, RN = a.R * a.N;
  int64_t i0, i1;
  pair_of(a.halves, a.N, j, i0, i1);
  double sn, cs;
  sincos(static_cast<double>(a.phases[u]), &sn, &cs);
  const float c = static_cast<float>(cs), s = static_cast<float>(sn);
  float dphase = 0.f;
  for (int64_t r = 0; r < a.R; ++r)
    for (int which = 0; which < 2; ++which) {
      const int64_t at0 = step * RN + r * a.N;
      const float* y = (which == 0 ? a.q : a.k) + at0;
      float* dy = (which == 0 ? a.dq : a.dk) + at0;
      // y = rotate(x): dx = rotate back(dy); d angle = dy1 y0 - dy0 y1.
      const float da = dy[i0], db = dy[i1];
      dphase += db * y[i0] - da * y[i1];
      dy[i0] = da * c + db * s;
      dy[i1] = -da * s + db * c;
    }
  a.dphase[u] = dphase;
}

// A block per (b, h, group of up to kCumsumAngles angles): thread (g, jj)
// takes angle j = j0 + jj over segment g < K of time (K = blockDim.x / the
// group's width, segments of ceil(L / K) steps). Each thread sums its
// segment from the end, the segments' sums are scanned from the last
// segment back (a fixed tree in shared memory), then each thread walks its
// segment again from the sum of the segments after it. In double, as the
// serial walk it replaced (a thread per (b, h, angle) over all L steps:
// 19 ms of a 130m Mamba-3 step at 8 x 2048, 24 blocks busy); the order of
// the double additions differs from it, not the F32 results' precision.
// A block per (b, h) over 32 angles was still 24 blocks at 1 x 2048 with
// 64 steps a thread; groups of 8 angles give 4 times the blocks and 16
// steps a thread. Each walk loads kAhead steps before adding (and storing)
// them: a load after a store cannot be moved above it.
constexpr int kCumsumAngles = 8;
constexpr int kCumsumThreads = 1024;
constexpr int kAhead = 8;

__global__ void __launch_bounds__(kCumsumThreads) cumsum_kernel(Mamba3PrepareBackwardLaunch a) {
  extern __shared__ double seg_sums[];  // 2 x K x width: the scan's two buffers
  const int64_t S = a.S, width = min(S, int64_t{kCumsumAngles}), groups = (S + width - 1) / width;
  const int64_t bh = blockIdx.x / groups, j = (blockIdx.x % groups) * width + threadIdx.x % width;
  const int K = static_cast<int>(blockDim.x / width), w = static_cast<int>(width);
  const int g = static_cast<int>(threadIdx.x / width), me = static_cast<int>(threadIdx.x);
  const int64_t len = (a.L + K - 1) / K, t0 = g * len, t1 = j < S ? min(a.L, t0 + len) : t0;
  float* d = a.dphase + bh * a.L * S;
  // The segment's steps t1 - 1 down to t0, kAhead at a time: f(t, value).
  auto walk = [&](auto f) {
    for (int64_t t = t1 - 1; t >= t0; t -= kAhead) {
      float v[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) v[u] = t - u >= t0 ? d[(t - u) * S + j] : 0.f;
#pragma unroll
      for (int u = 0; u < kAhead; ++u)
        if (t - u >= t0) f(t - u, v[u]);
    }
  };
  double sum = 0;
  walk([&](int64_t, float v) { sum += v; });
  // Suffix sums over g (Hillis-Steele from the last segment, ping-pong).
  const int cells = K * w;
  int cur = 0;
  seg_sums[me] = sum;
  __syncthreads();
  for (int off = 1; off < K; off *= 2) {
    const double* in = seg_sums + cur * cells;
    const double v = g + off < K ? in[me] + in[me + off * w] : in[me];
    cur ^= 1;
    seg_sums[cur * cells + me] = v;
    __syncthreads();
  }
  double acc = g + 1 < K ? seg_sums[cur * cells + me + w] : 0.0;
  walk([&](int64_t t, float v) {
    acc += v;
    d[t * S + j] = static_cast<float>(acc);
  });
}

__global__ void steps_kernel(Mamba3PrepareBackwardLaunch a) {
  const int64_t step = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (step >= a.B * a.H * a.L) return;
  const int64_t bh = step / a.L, t = step % a.L, b = bh / a.H, h = bh % a.H, row = b * a.L + t;
  const float pre = at(a.ddt, row, h) + a.dt_bias[h];
  float grad_dt = a.d_dt[step];
  for (int64_t j = 0; j < a.S; ++j)
    grad_dt += a.dphase[step * a.S + j] * (kPi * tanhf(at(a.ang, row, j)));
  at(a.dddt, row, h) = grad_dt * sigmoid_of(pre);
  // A = min(-f(ddA), -A_floor): no gradient where the floor wins.
  const float v = at(a.ddA, row, h);
  const bool floored = -heavy_tail(v) >= -a.A_floor;
  at(a.dddA, row, h) = floored ? 0.f : -a.dA[step] * heavy_tail_grad(v);
  const float lam = sigmoid_of(at(a.trap, row, h));
  at(a.dtrap, row, h) = a.dlam[step] * lam * (1.f - lam);
}

// The rate of angle j is shared by the heads: its gradient sums
// dphase dt over them, in head order.
__global__ void rates_kernel(Mamba3PrepareBackwardLaunch a) {
  const int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (u >= a.B * a.L * a.S) return;
  const int64_t row = u / a.S, j = u % a.S, b = row / a.L, t = row % a.L;
  float drate = 0.f;
  for (int64_t h = 0; h < a.H; ++h) {
    const int64_t step = (b * a.H + h) * a.L + t;
    drate += a.dphase[step * a.S + j] * softplus_of(at(a.ddt, row, h) + a.dt_bias[h]);
  }
  const float th = tanhf(at(a.ang, row, j));
  at(a.dang, row, j) = drate * kPi * (1.f - th * th);
}

// Warp per (row, r, group, B or C): dn = the un-rotated gradient of k (or q)
// summed over the group's heads; out = x s w: dx = s w dn - x s^3 sum(x w dn) / N,
// and the weight's contribution dn x s.
__global__ void norms_kernel(Mamba3PrepareBackwardLaunch a) {
  const int64_t RG = a.R * a.G;
  const int64_t warp = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= a.B * a.L * RG * 2) return;  // the whole warp: the shuffles see all lanes
  const bool isB = warp % 2 == 0;
  const int64_t unit = warp / 2, row = unit / RG, rg = unit % RG, r = rg / a.G, grp = rg % a.G;
  const int64_t b = row / a.L, t = row % a.L, N = a.N, per = a.H / a.G;
  const ConstRows& src = isB ? a.Bm : a.C;
  const Rows& dsrc = isB ? a.dB : a.dC;
  const float* w = isB ? a.B_norm : a.C_norm;
  const float* g = isB ? a.dk : a.dq;
  const float* x = src.p + row * src.stride + rg * N;
  float* dx = dsrc.p + row * dsrc.stride + rg * N;
  float* contrib = isB ? a.cBn : a.cCn;
  if (contrib) contrib += (row * RG + rg) * N;
  // The heads' rows kHeadsAhead at a time: their loads issued before the
  // additions (in head order, as one at a time: bit-identical sums).
  const float* g0 = g + (((b * a.H + grp * per) * a.L + t) * a.R + r) * N;
  const int64_t head_stride = a.L * a.R * N;
  auto dn_of = [&](int64_t n) {
    constexpr int kHeadsAhead = 8;
    float s = 0.f;
    for (int64_t h = 0; h < per; h += kHeadsAhead) {
      float v[kHeadsAhead];
#pragma unroll
      for (int u = 0; u < kHeadsAhead; ++u) v[u] = h + u < per ? g0[(h + u) * head_stride + n] : 0.f;
#pragma unroll
      for (int u = 0; u < kHeadsAhead; ++u)
        if (h + u < per) s += v[u];
    }
    return s;
  };
  // dn of the lane's first kKept channels kept in registers between the
  // two passes: the sum over the group's heads (24 strided rows at 130m)
  // was computed twice (75 us a launch at 1 x 2048, SISO, on an H100).
  constexpr int kKept = 8;
  float kept[kKept];
  double ss = 0, dot = 0;  // in double, like the forward's norm
#pragma unroll
  for (int i = 0; i < kKept; ++i) {
    const int64_t n = lane + 32 * i;
    if (n < N) {
      kept[i] = dn_of(n);
      ss += static_cast<double>(x[n]) * x[n];
      dot += static_cast<double>(x[n]) * w[n] * kept[i];
    }
  }
  for (int64_t n = lane + 32 * kKept; n < N; n += 32) {
    ss += static_cast<double>(x[n]) * x[n];
    dot += static_cast<double>(x[n]) * w[n] * dn_of(n);
  }
  for (int m = 16; m > 0; m /= 2) {
    ss += __shfl_xor_sync(0xffffffffu, ss, m);
    dot += __shfl_xor_sync(0xffffffffu, dot, m);
  }
  const double sd = 1.0 / sqrt(ss / static_cast<double>(N) + a.norm_eps);
  const float s = static_cast<float>(sd);
  const float k = static_cast<float>(dot * sd * sd * sd / static_cast<double>(N));
  auto write = [&](int64_t n, float dn) {
    dx[n] = s * w[n] * dn - x[n] * k;
    if (contrib) contrib[n] = dn * x[n] * s;
  };
#pragma unroll
  for (int i = 0; i < kKept; ++i)
    if (lane + 32 * i < N) write(lane + 32 * i, kept[i]);
  for (int64_t n = lane + 32 * kKept; n < N; n += 32) write(n, dn_of(n));
}

// Thread per (row, h, 4 consecutive p): v = x mimo_x, so dx = sum_r dv
// mimo_x and mimo_x's contribution dv x. Block y: rows (strided by the
// grid), block x: the row's quads of H P channels, so that a thread divides
// in 32 bits once (a flat index split by five 64-bit divisions took 34 us a
// launch at 1 x 2048 SISO, H100, for 25 MB of traffic; a thread per
// channel, 4-byte accesses, 30 us for 38 MB). 16-byte accesses when `vec`.
__global__ void v_kernel(Mamba3PrepareBackwardLaunch a, bool vec) {
  const int P = static_cast<int>(a.P), V = (P + 3) / 4, R = static_cast<int>(a.R);
  const int e = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (e >= static_cast<int>(a.H) * V) return;
  const int h = e / V, p0 = 4 * (e - h * V), count = min(4, P - p0), col = h * P + p0;
  const int64_t HRP = a.H * a.R * a.P;
  for (int64_t row = blockIdx.y; row < a.B * a.L; row += gridDim.y) {
    const int64_t b = row / a.L, t = row - b * a.L, step = (b * a.H + h) * a.L + t;
    float xv[4], sum[4] = {};
    load_quad(xv, a.x.p + row * a.x.stride + col, count, vec);
    for (int r = 0; r < R; ++r) {
      const int64_t m = (int64_t{h} * R + r) * P + p0;
      float gv[4], mx[4], c[4];
      load_quad(gv, a.dv + (step * R + r) * P + p0, count, vec);
      if (a.mimo_x) load_quad(mx, a.mimo_x + m, count, vec);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        sum[u] += a.mimo_x ? gv[u] * mx[u] : gv[u];
        c[u] = gv[u] * xv[u];
      }
      if (a.cmx) store_quad(a.cmx + row * HRP + m, c, count, vec);
    }
    store_quad(a.dx.p + row * a.dx.stride + col, sum, count, vec);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_mamba3_prepare_backward(const Mamba3PrepareBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.L == 0) return;
  const int64_t steps = a.B * a.H * a.L;
  if (a.S > 0) {
    unrotate_kernel<<<blocks_for(steps * a.S), kThreads, 0, s>>>(a);
    // Groups of up to kCumsumAngles angles; segments of at least 16 steps.
    const int64_t width = std::min<int64_t>(a.S, kCumsumAngles), groups = (a.S + width - 1) / width;
    const int64_t segs =
        std::max<int64_t>(1, std::min<int64_t>(kCumsumThreads / width, (a.L + 15) / 16));
    cumsum_kernel<<<static_cast<unsigned>(a.B * a.H * groups), static_cast<unsigned>(segs * width),
                    static_cast<size_t>(2 * segs * width) * sizeof(double), s>>>(a);
    rates_kernel<<<blocks_for(a.B * a.L * a.S), kThreads, 0, s>>>(a);
  }
  steps_kernel<<<blocks_for(steps), kThreads, 0, s>>>(a);
  norms_kernel<<<blocks_for(a.B * a.L * a.R * a.G * 2 * 32), kThreads, 0, s>>>(a);
  constexpr int kVThreads = 128;  // 384 quads a row at 130m: 3 full blocks
  const int64_t quads = a.H * ((a.P + 3) / 4);
  const dim3 v_grid(static_cast<unsigned>((quads + kVThreads - 1) / kVThreads),
                    static_cast<unsigned>(std::min<int64_t>(a.B * a.L, 65535)));
  const bool vec = a.P % 4 == 0 && a.x.stride % 4 == 0 && a.dx.stride % 4 == 0 && aligned16(a.x.p) &&
                   aligned16(a.dx.p) && aligned16(a.dv) && (a.mimo_x == nullptr || aligned16(a.mimo_x)) &&
                   (a.cmx == nullptr || aligned16(a.cmx));
  v_kernel<<<v_grid, kVThreads, 0, s>>>(a, vec);
}

}  // namespace ssm::cuda
