// mamba3_output backward on the GPU: a warp per (row, head), lanes over the
// head's channels, the ranks in turn (the RMSNorm's two sums over P by warp
// shuffles). The parameter gradients leave per-row contributions that
// launch_sum_rows adds up in a fixed order. Also launch_sum_rows itself.
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_mamba3_attention_backward.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoid_of(float x) {
  return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x));
}

__device__ double warp_sum(double v) {
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Per (row, h, r, p), with zr = z mimo_z, gate = SiLU(zr), on = the normed o:
//   y gets on gate mimo_o; d(on) = dy mimo_o gate; dzr = dy mimo_o on SiLU'(zr);
//   through the norm on = o s w: d_o = s w don - o s^3 sum(o w don) / P.
// A lane's first kKept channels are loaded once, all before the sums, and
// kept in registers for the writes (the two passes each loaded them one
// channel at a time: 58 us a launch at 1 x 2048 SISO on an H100 for ~82 MB
// of traffic); the same operations per channel, in the same order.
__global__ void output_backward_kernel(Mamba3OutputBackwardLaunch a) {
  const int64_t warp = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= a.B * a.L * a.H) return;  // the whole warp: the shuffles below see all lanes
  const int64_t row = warp / a.H, h = warp % a.H, b = row / a.L, t = row % a.L;
  const int64_t R = a.R, P = a.P, HP = a.H * P, HRP = a.H * R * P;
  const int64_t base = ((b * a.H + h) * a.L + t) * R * P;  // o_r = o + base + r P
  const float* zrow = a.z.p + row * a.z.stride + h * P;
  const float* dyrow = a.dy.p + row * a.dy.stride + h * P;
  float* dzrow = a.dz.p + row * a.dz.stride + h * P;
  constexpr int kKept = 2;  // P 64 at 130m
  for (int64_t r = 0; r < R; ++r) {
    const float* o = a.o + base + r * P;
    float* d_o = a.d_o + base + r * P;
    // Channel p's inputs: o, z, dy, mimo_z, mimo_o, the norm's weight.
    struct In {
      float o, z, dy, mz, mo, w;
    };
    auto load = [&](int64_t p) {
      const int64_t m = (h * R + r) * P + p;
      return In{o[p], zrow[p], dyrow[p], a.mimo_z ? a.mimo_z[m] : 1.f, a.mimo_o ? a.mimo_o[m] : 1.f,
                a.norm ? a.norm[h * P + p] : 1.f};
    };
    In kept[kKept];
#pragma unroll
    for (int i = 0; i < kKept; ++i)
      if (lane + 32 * i < P) kept[i] = load(lane + 32 * i);
    float s = 1.f, kdot = 0.f;
    if (a.norm) {
      double ss = 0, dot = 0;  // in double, like the forward's norm
      auto add = [&](const In& v) {
        const float zr = v.z * v.mz, gate = zr * sigmoid_of(zr);
        ss += static_cast<double>(v.o) * v.o;
        dot += static_cast<double>(v.o) * v.w * (v.dy * v.mo * gate);
      };
#pragma unroll
      for (int i = 0; i < kKept; ++i)
        if (lane + 32 * i < P) add(kept[i]);
      for (int64_t p = lane + 32 * kKept; p < P; p += 32) add(load(p));
      ss = warp_sum(ss);
      dot = warp_sum(dot);
      const double sd = 1.0 / sqrt(ss / static_cast<double>(P) + a.norm_eps);
      s = static_cast<float>(sd);
      kdot = static_cast<float>(dot * sd * sd * sd / static_cast<double>(P));
    }
    auto write = [&](int64_t p, const In& v) {
      const int64_t m = (h * R + r) * P + p;
      const float zr = v.z * v.mz;
      const float sg = sigmoid_of(zr), gate = zr * sg, sgrad = sg * (1.f + zr * (1.f - sg));
      const float on = a.norm ? v.o * s * v.w : v.o;
      const float dgated = v.dy * v.mo;
      const float dzr = dgated * on * sgrad;
      const float don = dgated * gate;
      dzrow[p] = (r == 0 ? 0.f : dzrow[p]) + dzr * v.mz;
      if (a.co) a.co[row * HRP + m] = v.dy * on * gate;
      if (a.cz) a.cz[row * HRP + m] = dzr * v.z;
      if (a.norm) {
        d_o[p] = s * v.w * don - v.o * kdot;
        if (a.cn) {
          float* c = a.cn + row * HP + h * P + p;
          *c = (r == 0 ? 0.f : *c) + don * v.o * s;
        }
      } else {
        d_o[p] = don;
      }
    };
#pragma unroll
    for (int i = 0; i < kKept; ++i)
      if (lane + 32 * i < P) write(lane + 32 * i, kept[i]);
    for (int64_t p = lane + 32 * kKept; p < P; p += 32) write(p, load(p));
  }
}

// Block (column tile, k): the rows [k rows / K, (k+1) rows / K) of a column
// tile summed in order into partial row k.
__global__ void partial_rows_kernel(ConstRows src, float* partial) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= src.cols) return;
  const int64_t k = blockIdx.y;
  const int64_t r0 = src.rows * k / kPartialRows, r1 = src.rows * (k + 1) / kPartialRows;
  float acc = 0.f;
  for (int64_t r = r0; r < r1; ++r) acc += src.p[r * src.stride + c];
  partial[k * src.cols + c] = acc;
}

// partial_rows_kernel over the rows (b, t) and columns (h, i) of a (B, H,
// L, n) tensor, read in place. The row's (b, t) is stepped, not divided
// out per row, and kAhead rows' loads are issued before they are added (in
// the same order: bit-identical sums); a 64-bit division per row and one
// load at a time ran at ~1 TB/s (25 us a launch at 1 x 2048, n 128 on an
// H100).
__global__ void head_partial_rows_kernel(const float* src, int64_t L, int64_t H, int64_t n,
                                         int64_t rows, float* partial) {
  const int64_t cols = H * n, c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const int64_t k = blockIdx.y, h = c / n, i = c % n;
  const int64_t r0 = rows * k / kPartialRows, r1 = rows * (k + 1) / kPartialRows;
  // Row r = b L + t sits at ((b H + h) L + t) n + i: one step of t is n
  // floats, one of b (t back to 0) (H - 1) L n + n more.
  const int64_t b0 = r0 / L;
  int64_t t = r0 - b0 * L;
  const float* p = src + ((b0 * H + h) * L + t) * n + i;
  const int64_t next_batch = ((H - 1) * L + 1) * n;
  constexpr int kAhead = 8;
  float acc = 0.f;
  for (int64_t r = r0; r < r1; r += kAhead) {
    float v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      v[u] = r + u < r1 ? *p : 0.f;
      if (++t == L) {
        t = 0;
        p += next_batch;
      } else {
        p += n;
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (r + u < r1) acc += v[u];
  }
  partial[k * cols + c] = acc;
}

}  // namespace

void launch_sum_head_rows(const float* src, int64_t B, int64_t L, int64_t H, int64_t n,
                          float* partial, float* dst, cudaStream_t s) {
  const int64_t cols = H * n;
  if (cols == 0 || B * L == 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), kPartialRows);
  head_partial_rows_kernel<<<grid, kThreads, 0, s>>>(src, L, H, n, B * L, partial);
  launch_column_sums(ConstRows{partial, kPartialRows, cols, cols}, dst, s);
}

void launch_sum_rows(ConstRows src, float* partial, float* dst, cudaStream_t s) {
  if (src.cols == 0) return;
  const dim3 grid(static_cast<unsigned>((src.cols + kThreads - 1) / kThreads), kPartialRows);
  partial_rows_kernel<<<grid, kThreads, 0, s>>>(src, partial);
  launch_column_sums(ConstRows{partial, kPartialRows, src.cols, src.cols}, dst, s);
}

void launch_mamba3_output_backward(const Mamba3OutputBackwardLaunch& a, cudaStream_t s) {
  const int64_t warps = a.B * a.L * a.H;
  if (warps == 0) return;
  output_backward_kernel<<<static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads), kThreads,
                           0, s>>>(a);
}

}  // namespace ssm::cuda
