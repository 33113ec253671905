// The row-wise part of the fused head cross-entropy (the products are
// cuBLAS calls in train_ops.cpp) and the AdamW update.
#include <cuda_bf16.h>
#include <cstdint>

#include "ops/cuda/launch_train.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

// Fixed-tree block reductions (the same on every thread).
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int o = kThreads / 2; o > 0; o /= 2) {
    if (threadIdx.x < o) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + o]);
    __syncthreads();
  }
  const T r = scratch[0];
  __syncthreads();
  return r;
}

// Block per row of logits (the first V columns are the vocabulary's; the
// rest, padding up to an aligned stride, get a zero gradient). One read
// finds each thread's running maximum and its sum of exp(x - max) (the sum
// rescaled when the maximum grows), combined over the block in a fixed
// tree with the sums in double; a second read writes grad_scale (softmax -
// onehot(target)): in place in F32, or rounded to bf16 into g (the
// products' input under bf16 compute: no F32 gradient written and read
// back to be rounded). The logits come from a product in F32, so exp of
// their distance to the maximum in float is as exact as the logits are.
struct MaxSum {
  float m;
  double s;
};

__device__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0};
  return {m, a.s * exp(static_cast<double>(a.m - m)) + b.s * exp(static_cast<double>(b.m - m))};
}

__device__ void add_exp(float x, float& m, float& s) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else {
    s += expf(x - m);
  }
}

__global__ void __launch_bounds__(kThreads)
    softmax_xent_kernel(Rows logits, int64_t V, const int64_t* targets, double grad_scale,
                        double* loss, __nv_bfloat16* g, int64_t g_stride) {
  __shared__ MaxSum scratch[kThreads];
  const int64_t r = blockIdx.x, cols = logits.cols;
  float* row = logits.p + r * logits.stride;
  __nv_bfloat16* grow = g ? g + r * g_stride : nullptr;
  // Targets on the device were not checked on the host: one outside the
  // vocabulary counts as none rather than reading past the row.
  const int64_t target = targets[r] < V ? targets[r] : -1;
  const bool vec = logits.stride % 4 == 0 && reinterpret_cast<uintptr_t>(logits.p) % 16 == 0 &&
                   (!g || (g_stride % 4 == 0 && reinterpret_cast<uintptr_t>(g) % 8 == 0));
  const int64_t V4 = vec ? V / 4 : 0;  // float4 pieces wholly inside the vocabulary
  double lse = 0;
  if (target >= 0) {
    float m = -INFINITY, s = 0.f;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int64_t j = threadIdx.x; j < V4; j += kThreads) {
      const float4 x = row4[j];
      add_exp(x.x, m, s);
      add_exp(x.y, m, s);
      add_exp(x.z, m, s);
      add_exp(x.w, m, s);
    }
    for (int64_t v = 4 * V4 + threadIdx.x; v < V; v += kThreads) add_exp(row[v], m, s);
    scratch[threadIdx.x] = {m, s};
    __syncthreads();
    for (int o = kThreads / 2; o > 0; o /= 2) {
      if (threadIdx.x < o)
        scratch[threadIdx.x] = combine(scratch[threadIdx.x], scratch[threadIdx.x + o]);
      __syncthreads();
    }
    lse = static_cast<double>(scratch[0].m) + log(scratch[0].s);
    if (threadIdx.x == 0) loss[r] = lse - static_cast<double>(row[target]);
    __syncthreads();  // the target's logit is read before the row is overwritten
  } else if (threadIdx.x == 0) {
    loss[r] = 0;
  }
  if (grad_scale == 0) return;  // the loss alone: no gradient written
  // Zero outside the vocabulary and on rows without a target.
  auto grad = [&](int64_t v, float x) {
    if (target < 0 || v >= V) return 0.f;
    const float p = expf(static_cast<float>(static_cast<double>(x) - lse));
    return static_cast<float>(grad_scale * (static_cast<double>(p) - (v == target ? 1.0 : 0.0)));
  };
  const int64_t C4 = vec ? cols / 4 : 0;
  for (int64_t j = threadIdx.x; j < C4; j += kThreads) {
    const float4 x = reinterpret_cast<const float4*>(row)[j];
    const float4 d{grad(4 * j, x.x), grad(4 * j + 1, x.y), grad(4 * j + 2, x.z), grad(4 * j + 3, x.w)};
    if (grow) {
      const ushort4 o{__bfloat16_as_ushort(__float2bfloat16_rn(d.x)),
                      __bfloat16_as_ushort(__float2bfloat16_rn(d.y)),
                      __bfloat16_as_ushort(__float2bfloat16_rn(d.z)),
                      __bfloat16_as_ushort(__float2bfloat16_rn(d.w))};
      *reinterpret_cast<ushort4*>(grow + 4 * j) = o;
    } else {
      reinterpret_cast<float4*>(row)[j] = d;
    }
  }
  for (int64_t v = 4 * C4 + threadIdx.x; v < cols; v += kThreads) {
    const float d = grad(v, row[v]);
    if (grow) grow[v] = __float2bfloat16_rn(d);
    else row[v] = d;
  }
}

__global__ void sum_doubles_kernel(const double* v, int64_t n, double* out) {
  __shared__ double scratch[kThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) acc += v[i];
  acc = block_reduce(
      acc, [](double a, double b) { return a + b; }, scratch);
  if (threadIdx.x == 0) *out = acc;
}

// Stage 1 of a wide sum of squares: block j sums elements j*per .. in
// double into partial[j] (a fixed tree), so the result repeats exactly.
__global__ void sum_squares_partial_kernel(const float* p, int64_t n, double* partial) {
  __shared__ double scratch[kThreads];
  const int64_t per = (n + gridDim.x - 1) / gridDim.x, i0 = blockIdx.x * per;
  const int64_t i1 = i0 + per < n ? i0 + per : n;
  double acc = 0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += kThreads) {
    const double v = p[i];
    acc += v * v;
  }
  acc = block_reduce(acc, [](double a, double b) { return a + b; }, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One element's update: the per-slice kernel and the fused one share it, so
// that their results agree to the bit. Each product and sum is rounded on
// its own (__dmul_rn, __dadd_rn): left to itself nvcc fuses a product into
// the next sum where it likes, and it chose differently in the two kernels
// (their m and p differed on an H100, where the CPU emulator, without FMA,
// had them equal).
__device__ __forceinline__ void adamw_update(float& p, float g, float& m, float& v,
                                             const AdamWStep& s, double decay) {
  const double gi = g;
  const float mi = static_cast<float>(__dadd_rn(__dmul_rn(s.b1, m), __dmul_rn(1.0 - s.b1, gi)));
  const float vi =
      static_cast<float>(__dadd_rn(__dmul_rn(s.b2, v), __dmul_rn(__dmul_rn(1.0 - s.b2, gi), gi)));
  m = mi;
  v = vi;
  const double update = (mi / s.bc1) / (sqrt(vi / s.bc2) + s.eps);
  p = static_cast<float>(__dsub_rn(__dmul_rn(p, decay), __dmul_rn(s.lr, update)));
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWStep s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    adamw_update(p[i], g[i], m[i], v[i], s, s.decay);
}

// The clip's F32 scale from the squared norm, as clip_grad_norm
// (optimizer.cpp) decides it on the host: sqrt, the division and the sum are
// correctly rounded in double on both.
struct Clip {
  bool on = false;
  float scale = 1.f;
};
__device__ Clip clip_of(const double* sum_squares, double max_norm) {
  if (!sum_squares) return {};
  const double norm = sqrt(*sum_squares);
  if (max_norm <= 0 || norm <= max_norm) return {};
  return {true, static_cast<float>(max_norm / (norm + 1e-6))};
}

// The clipped gradient is rounded to F32 before the update, as the separate
// scale kernel stored it.
__device__ __forceinline__ float clipped(float g, const Clip& c) {
  return c.on ? __fmul_rn(g, c.scale) : g;
}

// An updated weight's bf16 copy: round to nearest even, as the weight
// copies' conversion (to_16bit_x4_kernel and to_bf16_kernel, elementwise.cu)
// rounds it, so that the copy is the one a conversion would make.
__device__ __forceinline__ unsigned short bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Grid-stride over the quads (4 elements) of every slice together (each
// slice starts at a multiple of 4: AdamWSliceLaunch::begin); a thread finds
// its first quad's slice by bisection, then walks forward with its stride.
// A whole quad whose four arrays are 16-byte aligned moves in 16-byte loads
// and stores; the rest element by element, through the same update. A
// slice with a bf16 copy gets each new value rounded there too.
__global__ void adamw_slices_kernel(const AdamWSliceLaunch* table, int64_t slices,
                                    int64_t elements, const AdamWStep* step) {
  const AdamWStep s = *step;
  const Clip clip = clip_of(s.clip_sum_squares, s.max_norm);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * 4;
  int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 4;
  if (i >= elements) return;
  int64_t lo = 0, hi = slices - 1;  // the last slice whose begin <= i
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (table[mid].begin <= i) lo = mid;
    else hi = mid - 1;
  }
  for (int64_t k = lo; i < elements; i += stride) {
    while (k + 1 < slices && table[k + 1].begin <= i) ++k;
    const AdamWSliceLaunch& t = table[k];
    const int64_t j = i - t.begin;
    if (j >= t.n) continue;  // the padding after a slice
    const double decay = t.decays ? s.decay : s.no_decay;
    float *p = t.p + j, *m = t.m + j, *v = t.v + j;
    const float* g = t.g + j;
    unsigned short* b = t.bf16 ? t.bf16 + j : nullptr;
    const auto bits = reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(g) |
                      reinterpret_cast<uintptr_t>(m) | reinterpret_cast<uintptr_t>(v);
    if (j + 4 <= t.n && bits % 16 == 0) {
      float4 p4 = *reinterpret_cast<float4*>(p), m4 = *reinterpret_cast<float4*>(m),
             v4 = *reinterpret_cast<float4*>(v);
      const float4 g4 = *reinterpret_cast<const float4*>(g);
      adamw_update(p4.x, clipped(g4.x, clip), m4.x, v4.x, s, decay);
      adamw_update(p4.y, clipped(g4.y, clip), m4.y, v4.y, s, decay);
      adamw_update(p4.z, clipped(g4.z, clip), m4.z, v4.z, s, decay);
      adamw_update(p4.w, clipped(g4.w, clip), m4.w, v4.w, s, decay);
      *reinterpret_cast<float4*>(p) = p4;
      *reinterpret_cast<float4*>(m) = m4;
      *reinterpret_cast<float4*>(v) = v4;
      if (b && reinterpret_cast<uintptr_t>(b) % 8 == 0) {
        *reinterpret_cast<ushort4*>(b) = ushort4{bf16_bits(p4.x), bf16_bits(p4.y), bf16_bits(p4.z),
                                                 bf16_bits(p4.w)};
      } else if (b) {
        b[0] = bf16_bits(p4.x);
        b[1] = bf16_bits(p4.y);
        b[2] = bf16_bits(p4.z);
        b[3] = bf16_bits(p4.w);
      }
    } else {
      const int64_t n = t.n - j < 4 ? t.n - j : 4;
      for (int64_t e = 0; e < n; ++e) {
        adamw_update(p[e], clipped(g[e], clip), m[e], v[e], s, decay);
        if (b) b[e] = bf16_bits(p[e]);
      }
    }
  }
}

}  // namespace

void launch_softmax_xent(Rows logits, int64_t V, const int64_t* targets, double grad_scale,
                         double* loss, void* g_bf16, int64_t g_stride, cudaStream_t s) {
  if (logits.rows == 0) return;
  softmax_xent_kernel<<<static_cast<unsigned>(logits.rows), kThreads, 0, s>>>(
      logits, V, targets, grad_scale, loss, static_cast<__nv_bfloat16*>(g_bf16), g_stride);
}

void launch_sum_doubles(const double* v, int64_t n, double* out, cudaStream_t s) {
  sum_doubles_kernel<<<1, kThreads, 0, s>>>(v, n, out);
}

void launch_sum_squares_dense(const float* p, int64_t n, double* partial, double* out, cudaStream_t s) {
  sum_squares_partial_kernel<<<kSumBlocks, kThreads, 0, s>>>(p, n, partial);
  sum_doubles_kernel<<<1, kThreads, 0, s>>>(partial, kSumBlocks, out);
}

AdamWStep adamw_step(double lr, double b1, double b2, double eps, double wd, double bc1,
                     double bc2) {
  AdamWStep s;
  s.lr = lr;
  s.b1 = b1;
  s.b2 = b2;
  s.eps = eps;
  s.decay = 1.0 - lr * wd;
  s.no_decay = 1.0 - lr * 0.0;
  s.bc1 = bc1;
  s.bc2 = bc2;
  return s;
}

namespace {

unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
}

}  // namespace

void launch_adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& step,
                  cudaStream_t s) {
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, step);
}

void launch_adamw_slices(const AdamWSliceLaunch* table, int64_t slices, int64_t elements,
                         const AdamWStep* step, cudaStream_t s) {
  if (elements == 0 || slices == 0) return;
  adamw_slices_kernel<<<blocks_for((elements + 3) / 4), kThreads, 0, s>>>(table, slices, elements,
                                                                          step);
}

}  // namespace ssm::cuda
