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
  for (int64_t r = 0; r < R; ++r) {
    const float* o = a.o + base + r * P;
    float* d_o = a.d_o + base + r * P;
    auto mz_of = [&](int64_t p) { return a.mimo_z ? a.mimo_z[(h * R + r) * P + p] : 1.f; };
    auto mo_of = [&](int64_t p) { return a.mimo_o ? a.mimo_o[(h * R + r) * P + p] : 1.f; };
    auto gate_of = [&](int64_t p) {
      const float zr = zrow[p] * mz_of(p);
      return zr * sigmoid_of(zr);
    };
    float s = 1.f, kdot = 0.f;
    if (a.norm) {
      double ss = 0, dot = 0;  // in double, like the forward's norm
      for (int64_t p = lane; p < P; p += 32) {
        ss += static_cast<double>(o[p]) * o[p];
        dot += static_cast<double>(o[p]) * a.norm[h * P + p] * (dyrow[p] * mo_of(p) * gate_of(p));
      }
      ss = warp_sum(ss);
      dot = warp_sum(dot);
      const double sd = 1.0 / sqrt(ss / static_cast<double>(P) + a.norm_eps);
      s = static_cast<float>(sd);
      kdot = static_cast<float>(dot * sd * sd * sd / static_cast<double>(P));
    }
    for (int64_t p = lane; p < P; p += 32) {
      const int64_t m = (h * R + r) * P + p;
      const float mz = mz_of(p), mo = mo_of(p), zv = zrow[p], zr = zv * mz;
      const float sg = sigmoid_of(zr), gate = zr * sg, sgrad = sg * (1.f + zr * (1.f - sg));
      const float w = a.norm ? a.norm[h * P + p] : 1.f;
      const float on = a.norm ? o[p] * s * w : o[p];
      const float dgated = dyrow[p] * mo;
      const float dzr = dgated * on * sgrad;
      const float don = dgated * gate;
      dzrow[p] = (r == 0 ? 0.f : dzrow[p]) + dzr * mz;
      if (a.co) a.co[row * HRP + m] = dyrow[p] * on * gate;
      if (a.cz) a.cz[row * HRP + m] = dzr * zv;
      if (a.norm) {
        d_o[p] = s * w * don - o[p] * kdot;
        if (a.cn) {
          float* c = a.cn + row * HP + h * P + p;
          *c = (r == 0 ? 0.f : *c) + don * o[p] * s;
        }
      } else {
        d_o[p] = don;
      }
    }
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
// L, n) tensor, read in place.
__global__ void head_partial_rows_kernel(const float* src, int64_t L, int64_t H, int64_t n,
                                         int64_t rows, float* partial) {
  const int64_t cols = H * n, c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const int64_t k = blockIdx.y, h = c / n, i = c % n;
  const int64_t r0 = rows * k / kPartialRows, r1 = rows * (k + 1) / kPartialRows;
  float acc = 0.f;
  for (int64_t r = r0; r < r1; ++r) acc += src[(((r / L) * H + h) * L + r % L) * n + i];
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
