// Attention with a KV cache on the GPU: append_kv a thread per channel pair
// of a token (rotation angles in double, like ref); attention
//   flash_kernel  (prefill: L > 1, head dim <= 128) a block per (sequence,
//                 head, tile of 64 queries): tiles of 64 keys streamed
//                 through shared memory (cp.async, the next tile's copy
//                 in flight while this one is used), Q K^T and P V on the
//                 tensor cores (attention_tiles.h), the online softmax in
//                 F32 by the 4 lanes that hold a row, key tiles past the
//                 tile's last query skipped and the diagonal ones masked;
//   attention_kernel (decode, L = 1, or wider heads) a block per (sequence,
//                 head, query), its keys' scores in shared memory, F32: one
//                 query would leave 63 of a tile's 64 rows idle.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/launch_hybrid.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"

// After the primitives it builds on.
#include "ops/cuda/attention_tiles.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void append_kv_kernel(AttentionLaunch a) {
  const int64_t row = blockIdx.x, b = row / a.L, t = row % a.L, pos = a.past[b] + t;
  float* q = a.qkv.p + row * a.qkv.stride;
  float* k = q + a.H * a.hd;
  const float* v = k + a.Hkv * a.hd;
  // Rotation: head-local channel e < half is paired with e + half.
  const int64_t rot = (a.H + a.Hkv) * a.half;
  for (int64_t i = threadIdx.x; i < rot; i += blockDim.x) {
    const int64_t head = i / a.half, e = i % a.half;
    float* x = q + head * a.hd;  // k's heads follow q's in the row
    double sn, cs;
    sincos(static_cast<double>(pos) * static_cast<double>(a.inv_freq[e]), &sn, &cs);
    const double x0 = x[e], x1 = x[e + a.half];
    x[e] = static_cast<float>(x0 * cs - x1 * sn);
    x[e + a.half] = static_cast<float>(x0 * sn + x1 * cs);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.Hkv * a.hd; i += blockDim.x) {
    const int64_t h = i / a.hd, e = i % a.hd;
    const int64_t at = ((b * a.Hkv + h) * a.capacity + pos) * a.hd + e;
    a.k_cache[at] = k[i];
    a.v_cache[at] = v[i];
  }
}

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
    r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

__global__ void attention_kernel(AttentionLaunch a) {
  extern __shared__ float p[];  // max_keys scores
  __shared__ float scratch[kThreads / 32];
  const int64_t row = blockIdx.x / a.H, h = blockIdx.x % a.H, b = row / a.L, t = row % a.L;
  const int64_t j = h / (a.H / a.Hkv), n = a.past[b] + t + 1;
  const float* q = a.qkv.p + row * a.qkv.stride + h * a.hd;
  const float* K = a.k_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  const float* V = a.v_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
    float d = 0.f;
    for (int64_t e = 0; e < a.hd; ++e) d += q[e] * K[s * a.hd + e];
    p[s] = a.scale * d;
    mx = fmaxf(mx, p[s]);
  }
  mx = block_reduce(mx, true, scratch);
  float sum = 0.f;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) sum += p[s] = expf(p[s] - mx);
  sum = block_reduce(sum, false, scratch);  // its barrier also publishes p
  const float inv = 1.f / sum;
  float* o = a.out.p + row * a.out.stride + h * a.hd;
  for (int64_t e = threadIdx.x; e < a.hd; e += blockDim.x) {
    float acc = 0.f;
    for (int64_t s = 0; s < n; ++s) acc += p[s] * V[s * a.hd + e];
    o[e] = acc * inv;
  }
}

// The flash kernel's shared memory in floats: Q, two buffers of K and V,
// the warps' P rows.
int64_t flash_floats(attn::Pitches p) {
  return int64_t{attn::kRows} * (3 * p.ld + 2 * p.ld8 + attn::kScoreLd);
}

template <bool kSplit, int kOT>
__global__ void __launch_bounds__(attn::kThreads, 2)
    flash_kernel(AttentionLaunch a, bool vec_q, bool vec_kv) {
  using namespace attn;
  extern __shared__ float smem[];
  const Pitches pt = Pitches::of(a.hd);
  const int hd = static_cast<int>(a.hd), ld = pt.ld, ldv = pt.ld8;
  // The last query tiles first: they have the most keys (the short ones fill in behind).
  const int64_t tiles_l = (a.L + kRows - 1) / kRows, tile = tiles_l - 1 - blockIdx.x % tiles_l;
  const int64_t bh = blockIdx.x / tiles_l, h = bh % a.H, b = bh / a.H, j = h / (a.H / a.Hkv);
  const int64_t t0 = tile * kRows, past = a.past[b];
  const int rows = static_cast<int>(std::min<int64_t>(kRows, a.L - t0));
  const int64_t last = past + t0 + rows;  // keys [0, last) are attended by some row
  float* Qs = smem;
  float* Ks = Qs + kRows * ld;       // 2 buffers
  float* Vs = Ks + 2 * kRows * ld;   // 2 buffers
  float* Ps = Vs + 2 * kRows * ldv;  // the warps' rows of P
  tiles::load_rows(Qs, ld, a.qkv.p + (b * a.L + t0) * a.qkv.stride + h * a.hd, a.qkv.stride, rows,
                   kRows, hd, pt.hdp, vec_q);
  const float* Kg = a.k_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  const float* Vg = a.v_cache + (b * a.Hkv + j) * a.capacity * a.hd;
  const auto load_kv = [&](int64_t kt, int buf) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, last - kt * kRows));
    tiles::load_rows(Ks + buf * kRows * ld, ld, Kg + kt * kRows * a.hd, a.hd, n, kRows, hd, pt.hdp,
                     vec_kv);
    tiles::load_rows(Vs + buf * kRows * ldv, ldv, Vg + kt * kRows * a.hd, a.hd, n, kRows, hd,
                     pt.hdp, vec_kv);
  };
  load_kv(0, 0);
  wait_async();
  __syncthreads();
  Acc o[kOT];
#pragma unroll
  for (int c = 0; c < kOT; ++c) tiles::zero(o[c]);
  // Every row attends key 0, in the first tile: its maximum is finite from there on.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this thread's columns only
  const int64_t key_tiles = (last + kRows - 1) / kRows;
  for (int64_t kt = 0; kt < key_tiles; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < key_tiles) load_kv(kt + 1, buf ^ 1);
    Acc s[2];
    dot_tile<kSplit>(s, Qs, Ks + buf * kRows * ld, ld, pt.hdp);
    // Keys above the first row's position: query row sees keys s <= past + t0 + row.
    const bool diagonal = kt * kRows + kRows - 1 > past + t0;
    const int64_t k0 = kt * kRows - past - t0;  // key col is above row when k0 + col > row
    float mx[2] = {m[0], m[1]};
    for_each_score(s, [&](float& x, int row, int col) {
      x = diagonal && k0 + col > row ? -INFINITY : a.scale * x;
      mx[row % 16 >= 8] = fmaxf(mx[row % 16 >= 8], x);
    });
    quad_reduce<true>(mx);
    float alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      alpha[i] = expf(m[i] - mx[i]);
      m[i] = mx[i];
      l[i] *= alpha[i];
    }
    for_each_score(s, [&](float& x, int row, int col) {
      const float p = expf(x - m[row % 16 >= 8]);
      l[row % 16 >= 8] += p;
      at(Ps, row, col) = p;
    });
    for_each_out<kOT>(o, kOT * 32, [&](float& x, int row, int) { x *= alpha[row % 16 >= 8]; });
    __syncwarp();
    times_rows<kSplit, kOT>(o, Ps, Vs + buf * kRows * ldv, ldv, hd);
    wait_async();
    __syncthreads();  // the next tile landed; this one's buffers and P free
  }
  quad_reduce<false>(l);
  float* out = a.out.p + (b * a.L + t0) * a.out.stride + h * a.hd;
  for_each_out<kOT>(o, hd, [&](float& x, int row, int col) {
    if (row < rows) out[row * a.out.stride + col] = x / l[row % 16 >= 8];
  });
}

template <bool kSplit, int kOT>
void launch_flash(const AttentionLaunch& a, cudaStream_t s) {
  const auto bytes = static_cast<size_t>(flash_floats(attn::Pitches::of(a.hd))) * sizeof(float);
  // Above 48 KiB a kernel's dynamic shared memory must be allowed first.
  static const bool allowed = [] {
    cudaFuncSetAttribute(flash_kernel<kSplit, kOT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int{200 * 1024});
    return true;
  }();
  (void)allowed;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec_q = a.hd % 4 == 0 && a.qkv.stride % 4 == 0 && aligned(a.qkv.p);
  const bool vec_kv = a.hd % 4 == 0 && aligned(a.k_cache) && aligned(a.v_cache);
  const auto blocks = static_cast<unsigned>(a.B * a.H * ((a.L + attn::kRows - 1) / attn::kRows));
  flash_kernel<kSplit, kOT><<<blocks, attn::kThreads, bytes, s>>>(a, vec_q, vec_kv);
}

template <bool kSplit>
void launch_flash_split(const AttentionLaunch& a, cudaStream_t s) {
  switch (attn::column_groups(a.hd)) {
    case 1:
      return launch_flash<kSplit, 1>(a, s);
    case 2:
      return launch_flash<kSplit, 2>(a, s);
    default:
      return launch_flash<kSplit, 4>(a, s);
  }
}

}  // namespace

bool attention_tiled(const AttentionLaunch& a) { return a.L > 1 && attn::column_groups(a.hd) > 0; }

void launch_attention_append_kv(const AttentionLaunch& a, cudaStream_t s) {
  if (a.B * a.L == 0) return;
  append_kv_kernel<<<static_cast<unsigned>(a.B * a.L), kThreads, 0, s>>>(a);
}

void launch_attention(const AttentionLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  if (attention_tiled(a)) {
    if (a.split)
      launch_flash_split<true>(a, s);
    else
      launch_flash_split<false>(a, s);
    return;
  }
  const size_t smem = static_cast<size_t>(std::max<int64_t>(1, a.max_keys)) * sizeof(float);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  attention_kernel<<<static_cast<unsigned>(a.B * a.L * a.H), kThreads, smem, s>>>(a);
}

}  // namespace ssm::cuda
