// The backward of RMSNorm and of the gated grouped norm: a fixed grid of
// kPartialRows blocks, each taking a run of rows (or (row, group) units)
// and writing its share of the weight gradient into its own partial row,
// which launch_column_sums then sums in order. No atomics: results repeat
// exactly.
#include <cstdint>

#include "ops/cuda/launch_train.h"
#include "ops/cuda/row_pieces.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoidf(float z) { return 1.f / (1.f + expf(-z)); }
__device__ float silu(float z) { return z * sigmoidf(z); }
__device__ float silu_grad(float z) {
  const float s = sigmoidf(z);
  return s * (1.f + z * (1.f - s));
}

__device__ float block_sum(float v) {
  __shared__ float warp_part[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_part[w];
  __syncthreads();
  return total;
}

// dx = r w g - v r^3 / n sum(v w g); dw += g v r (into the partial row).
__global__ void rms_norm_backward_kernel(ConstRows x, const float* w, float eps, ConstRows dout,
                                         Rows dx, bool accumulate, float* partial) {
  const int64_t D = x.cols;
  float* part = partial ? partial + blockIdx.x * D : nullptr;
  for (int64_t r = blockIdx.x; r < x.rows; r += gridDim.x) {
    const float* v = x.p + r * x.stride;
    const float* g = dout.p + r * dout.stride;
    float ss = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < D; i += kThreads) {
      ss += v[i] * v[i];
      dot += v[i] * (w ? w[i] : 1.f) * g[i];
    }
    ss = block_sum(ss);
    dot = block_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(D) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(D);
    float* o = dx.p + r * dx.stride;
    for (int64_t i = threadIdx.x; i < D; i += kThreads) {
      const float d = rs * (w ? w[i] : 1.f) * g[i] - v[i] * k;
      o[i] = accumulate ? o[i] + d : d;
      if (part) part[i] += g[i] * v[i] * rs;
    }
  }
}

__global__ void gated_rms_norm_backward_kernel(ConstRows y, ConstRows z, const float* w, int64_t n,
                                               float eps, bool norm_before_gate, ConstRows dout,
                                               Rows dy, Rows dz, float* partial) {
  const int64_t D = y.cols, groups = D / n;
  float* part = partial ? partial + blockIdx.x * D : nullptr;
  for (int64_t u = blockIdx.x; u < y.rows * groups; u += gridDim.x) {
    const int64_t row = u / groups, g0 = (u % groups) * n;
    const float* yr = y.p + row * y.stride + g0;
    const float* zr = z.p + row * z.stride + g0;
    const float* go = dout.p + row * dout.stride + g0;
    float* dyr = dy.p + row * dy.stride + g0;
    float* dzr = dz.p + row * dz.stride + g0;
    if (!w) {  // out = y silu(z)
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const float zi = zr[i], yi = yr[i], gi = go[i];
        dyr[i] = gi * silu(zi);
        dzr[i] = gi * yi * silu_grad(zi);
      }
      continue;
    }
    const float* wg = w + g0;
    // v: the normalised input; gv: the gradient reaching the norm's output / w.
    float ss = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float v = norm_before_gate ? yr[i] : yr[i] * silu(zr[i]);
      const float gv = norm_before_gate ? go[i] * silu(zr[i]) : go[i];
      ss += v * v;
      dot += v * wg[i] * gv;
    }
    ss = block_sum(ss);
    dot = block_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(n) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(n);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float zi = zr[i], yi = yr[i], s = silu(zi);
      const float v = norm_before_gate ? yi : yi * s;
      const float gv = norm_before_gate ? go[i] * s : go[i];
      const float dv = rs * wg[i] * gv - v * k;
      if (norm_before_gate) {
        dyr[i] = dv;
        dzr[i] = go[i] * v * rs * wg[i] * silu_grad(zi);
      } else {
        dyr[i] = dv * s;
        dzr[i] = dv * yi * silu_grad(zi);
      }
      if (part) part[g0 + i] += gv * v * rs;
    }
  }
}

// Prefill's many aligned rows (16-byte pieces, at most 2,048 wide): a warp
// per row (or (row, group)), 8 or 16 a block, each block the run of rows
// of its partial row. A block per row walking rows one by one, two block
// sums each, took 3-10 times the bytes' time at 2048 rows of 768 / 1536
// (H100: 50 / 107 us a launch). A lane keeps its columns' weight gradient
// in registers over its rows; the block's warps add theirs into shared
// memory in warp order, and the block writes its whole partial row (so it
// needs no zeroing). Group g of a gated norm is taken by the warps w with w
// % groups == g, so that a lane's columns stay the same.
// 16 warps a block, or 8 where a lane's pieces need more than the 128
// registers a thread of a 512-thread block can have (RMSNorm over 1,024
// floats, the gated norm over 1,536).
constexpr int rms_warps(int pieces) { return pieces > 8 ? 8 : 16; }
constexpr int gated_warps(int pieces) { return pieces > 12 ? 8 : 16; }
constexpr int kMaxRowFloats = 32 * 4 * 16;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float4 ld4(const float* p, int64_t j) { return reinterpret_cast<const float4*>(p)[j]; }
__device__ void st4(float* p, int64_t j, float4 v) { reinterpret_cast<float4*>(p)[j] = v; }
__device__ float4 ones4() { return float4{1.f, 1.f, 1.f, 1.f}; }

// This block's run [r0, r1) of the rows (gridDim.x runs).
__device__ void block_rows(int64_t rows, int64_t& r0, int64_t& r1) {
  const int64_t per = (rows + gridDim.x - 1) / gridDim.x;
  r0 = blockIdx.x * per;
  r1 = r0 + per < rows ? r0 + per : rows;
  if (r0 > rows) r0 = rows;
}

// The block's partial row (D floats) = the sum of its warps' acc (warp w's
// at columns g0(w)..), added in warp order.
template <int kPieces, int kWarps>
__device__ void write_partial(const float4 (&acc)[kPieces], int64_t g0, int n4, int64_t D,
                              float* part) {
  __shared__ float row[kMaxRowFloats];
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) row[i] = 0.f;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        const int j = lane + 32 * i;
        if (j < n4) {
          float* r = row + g0 + 4 * j;
          r[0] += acc[i].x;
          r[1] += acc[i].y;
          r[2] += acc[i].z;
          r[3] += acc[i].w;
        }
      }
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) part[i] = row[i];
}

template <int kPieces, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 1)
    rms_norm_backward_rows_kernel(ConstRows x, const float* w, float eps, ConstRows dout, Rows dx,
                                  bool accumulate, float* partial) {
  const int64_t D = x.cols;
  const int lane = threadIdx.x % 32, n4 = static_cast<int>(D / 4);
  int64_t r0, r1;
  block_rows(x.rows, r0, r1);
  float4 acc[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) acc[i] = float4{0.f, 0.f, 0.f, 0.f};
  for (int64_t r = r0 + threadIdx.x / 32; r < r1; r += kWarps) {
    const float* v = x.p + r * x.stride;
    const float* g = dout.p + r * dout.stride;
    float ss = 0, dot = 0;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int j = lane + 32 * i;
      if (j < n4) {
        const float4 a = ld4(v, j), b = ld4(g, j), c = w ? ld4(w, j) : ones4();
        ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
        dot += a.x * c.x * b.x + a.y * c.y * b.y + a.z * c.z * b.z + a.w * c.w * b.w;
      }
    }
    ss = warp_sum(ss);
    dot = warp_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(D) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(D);
    float* o = dx.p + r * dx.stride;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int j = lane + 32 * i;
      if (j < n4) {
        const float4 a = ld4(v, j), b = ld4(g, j), c = w ? ld4(w, j) : ones4();
        float4 d{rs * c.x * b.x - a.x * k, rs * c.y * b.y - a.y * k, rs * c.z * b.z - a.z * k,
                 rs * c.w * b.w - a.w * k};
        if (accumulate) {
          const float4 e = ld4(o, j);
          d = float4{e.x + d.x, e.y + d.y, e.z + d.z, e.w + d.w};
        }
        st4(o, j, d);
        acc[i].x += b.x * a.x * rs;
        acc[i].y += b.y * a.y * rs;
        acc[i].z += b.z * a.z * rs;
        acc[i].w += b.w * a.w * rs;
      }
    }
  }
  if (partial) write_partial<kPieces, kWarps>(acc, 0, n4, D, partial + blockIdx.x * D);
}

// One element of the gated norm's backward (see gated_rms_norm_backward_kernel).
struct GatedGrad {
  float dy, dz, dw;
};
__device__ GatedGrad gated_grad(float yi, float zi, float gi, float wi, float rs, float k,
                                bool norm_before_gate) {
  const float s = sigmoidf(zi) * zi;  // silu
  const float v = norm_before_gate ? yi : yi * s;
  const float gv = norm_before_gate ? gi * s : gi;
  const float dv = rs * wi * gv - v * k;
  if (norm_before_gate) return {dv, gi * v * rs * wi * silu_grad(zi), gv * v * rs};
  return {dv * s, dv * yi * silu_grad(zi), gv * v * rs};
}

template <int kPieces, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gated_rms_norm_backward_rows_kernel(ConstRows y, ConstRows z, const float* w, int64_t n,
                                        float eps, bool norm_before_gate, ConstRows dout, Rows dy,
                                        Rows dz, float* partial) {
  const int64_t D = y.cols;
  const int groups = static_cast<int>(D / n), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n4 = static_cast<int>(n / 4), slots = kWarps / groups;
  const int64_t g0 = (warp % groups) * n;
  int64_t r0, r1;
  block_rows(y.rows, r0, r1);
  float4 acc[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) acc[i] = float4{0.f, 0.f, 0.f, 0.f};
  for (int64_t r = r0 + warp / groups; r < r1; r += slots) {
    const float* yr = y.p + r * y.stride + g0;
    const float* zr = z.p + r * z.stride + g0;
    const float* go = dout.p + r * dout.stride + g0;
    float* dyr = dy.p + r * dy.stride + g0;
    float* dzr = dz.p + r * dz.stride + g0;
    if (!w) {  // out = y silu(z)
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        const int j = lane + 32 * i;
        if (j < n4) {
          const float4 a = ld4(yr, j), b = ld4(zr, j), c = ld4(go, j);
          st4(dyr, j, float4{c.x * silu(b.x), c.y * silu(b.y), c.z * silu(b.z), c.w * silu(b.w)});
          st4(dzr, j,
              float4{c.x * a.x * silu_grad(b.x), c.y * a.y * silu_grad(b.y),
                     c.z * a.z * silu_grad(b.z), c.w * a.w * silu_grad(b.w)});
        }
      }
      continue;
    }
    const float* wg = w + g0;
    float ss = 0, dot = 0;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int j = lane + 32 * i;
      if (j < n4) {
        const float4 a = ld4(yr, j), b = ld4(zr, j), c = ld4(go, j), e = ld4(wg, j);
        const float ya[4] = {a.x, a.y, a.z, a.w}, za[4] = {b.x, b.y, b.z, b.w},
                    ga[4] = {c.x, c.y, c.z, c.w}, wa[4] = {e.x, e.y, e.z, e.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float sz = silu(za[q]);
          const float v = norm_before_gate ? ya[q] : ya[q] * sz;
          const float gv = norm_before_gate ? ga[q] * sz : ga[q];
          ss += v * v;
          dot += v * wa[q] * gv;
        }
      }
    }
    ss = warp_sum(ss);
    dot = warp_sum(dot);
    const float rs = rsqrtf(ss / static_cast<float>(n) + eps);
    const float k = dot * rs * rs * rs / static_cast<float>(n);
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int j = lane + 32 * i;
      if (j < n4) {
        const float4 a = ld4(yr, j), b = ld4(zr, j), c = ld4(go, j), e = ld4(wg, j);
        const GatedGrad q0 = gated_grad(a.x, b.x, c.x, e.x, rs, k, norm_before_gate);
        const GatedGrad q1 = gated_grad(a.y, b.y, c.y, e.y, rs, k, norm_before_gate);
        const GatedGrad q2 = gated_grad(a.z, b.z, c.z, e.z, rs, k, norm_before_gate);
        const GatedGrad q3 = gated_grad(a.w, b.w, c.w, e.w, rs, k, norm_before_gate);
        st4(dyr, j, float4{q0.dy, q1.dy, q2.dy, q3.dy});
        st4(dzr, j, float4{q0.dz, q1.dz, q2.dz, q3.dz});
        acc[i].x += q0.dw;
        acc[i].y += q1.dw;
        acc[i].z += q2.dw;
        acc[i].w += q3.dw;
      }
    }
  }
  if (partial) write_partial<kPieces, kWarps>(acc, g0, n4, D, partial + blockIdx.x * D);
}

// Block: 32 columns x kSlices threads; thread (c, q) sums rows q, q +
// kSlices, ... of its column in order, then slice 0 adds the slices in
// order. A thread per column walking every row left a launch of 768
// columns on 3 multiprocessors, 128 dependent adds each (about 10 us).
constexpr int kSlices = 8;

__global__ void __launch_bounds__(32 * kSlices) column_sums_kernel(ConstRows src, float* dst) {
  __shared__ float part[kSlices][32];
  const int cx = threadIdx.x % 32, q = threadIdx.x / 32;
  const int64_t c = blockIdx.x * int64_t{32} + cx;
  float acc = 0;
  if (c < src.cols)
    for (int64_t r = q; r < src.rows; r += kSlices) acc += src.p[r * src.stride + c];
  part[q][cx] = acc;
  __syncthreads();
  if (q == 0 && c < src.cols) {
    float total = 0;
    for (int i = 0; i < kSlices; ++i) total += part[i][cx];
    dst[c] += total;
  }
}

int grid_for(int64_t units) {
  return static_cast<int>(units < kPartialRows ? (units > 0 ? units : 1) : kPartialRows);
}

bool rows_fit(const void* p, int64_t stride) { return aligned16(p) && stride % 4 == 0; }


template <int kPieces>
struct RmsNormBackwardRows {
  static void run(ConstRows x, const float* w, float eps, ConstRows dout, Rows dx, bool accumulate,
                  float* partial, cudaStream_t s) {
    constexpr int kWarps = rms_warps(kPieces);
    rms_norm_backward_rows_kernel<kPieces, kWarps><<<kPartialRows, kWarps * 32, 0, s>>>(
        x, w, eps, dout, dx, accumulate, partial);
  }
};

template <int kPieces>
struct GatedRmsNormBackwardRows {
  static void run(ConstRows y, ConstRows z, const float* w, int64_t n, float eps,
                  bool norm_before_gate, ConstRows dout, Rows dy, Rows dz, float* partial,
                  cudaStream_t s) {
    constexpr int kWarps = gated_warps(kPieces);
    gated_rms_norm_backward_rows_kernel<kPieces, kWarps><<<kPartialRows, kWarps * 32, 0, s>>>(
        y, z, w, n, eps, norm_before_gate, dout, dy, dz, partial);
  }
};

// The block-per-row kernels add into their partial rows: zeroed first.
void zero_partials(float* partial, int64_t cols, cudaStream_t s) {
  if (partial) cudaMemsetAsync(partial, 0, sizeof(float) * kPartialRows * cols, s);
}

}  // namespace

void launch_column_sums(ConstRows src, float* dst, cudaStream_t s) {
  if (src.cols == 0) return;
  column_sums_kernel<<<static_cast<unsigned>((src.cols + 31) / 32), 32 * kSlices, 0, s>>>(src,
                                                                                          dst);
}

// The partial rows a launch touches are the first grid_for(units) of them;
// the caller sums them all (zeros add nothing).
void launch_rms_norm_backward(ConstRows x, const float* w, float eps, ConstRows dout, Rows dx,
                              bool accumulate_dx, float* partial, cudaStream_t s) {
  if (x.rows == 0) return;
  const int64_t D = x.cols;
  if (D > 0 && D % 4 == 0 && D <= kMaxRowFloats && rows_fit(x.p, x.stride) &&
      rows_fit(dout.p, dout.stride) && rows_fit(dx.p, dx.stride) && (!w || aligned16(w))) {
    with_pieces<RmsNormBackwardRows>(pieces_for(D), x, w, eps, dout, dx, accumulate_dx, partial, s);
    return;
  }
  zero_partials(partial, D, s);
  rms_norm_backward_kernel<<<grid_for(x.rows), kThreads, 0, s>>>(x, w, eps, dout, dx, accumulate_dx,
                                                                 partial);
}

void launch_gated_rms_norm_backward(ConstRows y, ConstRows z, const float* w, int64_t group,
                                    float eps, bool norm_before_gate, ConstRows dout, Rows dy,
                                    Rows dz, float* partial, cudaStream_t s) {
  if (y.rows == 0) return;
  const int64_t n = group ? group : y.cols, groups = y.cols / n;
  if (n % 4 == 0 && y.cols <= kMaxRowFloats && gated_warps(pieces_for(n)) % groups == 0 &&
      rows_fit(y.p, y.stride) &&
      rows_fit(z.p, z.stride) && rows_fit(dout.p, dout.stride) && rows_fit(dy.p, dy.stride) &&
      rows_fit(dz.p, dz.stride) && (!w || aligned16(w))) {
    with_pieces<GatedRmsNormBackwardRows>(pieces_for(n), y, z, w, n, eps, norm_before_gate, dout, dy,
                                          dz, partial, s);
    return;
  }
  zero_partials(partial, y.cols, s);
  gated_rms_norm_backward_kernel<<<grid_for(y.rows * groups), kThreads, 0, s>>>(
      y, z, w, n, eps, norm_before_gate, dout, dy, dz, partial);
}

}  // namespace ssm::cuda
