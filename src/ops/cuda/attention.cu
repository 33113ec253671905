// Attention with a KV cache on the GPU: append_kv a thread per channel pair
// of a token (rotation angles in double, like ref); attention
//   flash_kernel  (prefill: L > 1, head dim <= 128) a block per (sequence,
//                 head, tile of 64 queries): tiles of 64 keys streamed
//                 through shared memory (cp.async, the next tile's copy
//                 in flight while this one is used), Q K^T and P V on the
//                 tensor cores (attention_tiles.h), the online softmax in
//                 F32 by the 4 lanes that hold a row, key tiles past the
//                 tile's last query skipped and the diagonal ones masked;
//   decode_split_kernel (decode, L = 1, or wider heads) flash decoding: a
//                 block per (sequence, head, query, split of the keys), its
//                 tiles of 64 keys under the online softmax in F32, then
//                 decode_combine_kernel sums the splits' partials in a fixed
//                 order; no limit on the keys (one query would leave 63 of a
//                 flash tile's 64 rows idle).
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
constexpr int64_t kMaxShared = 200 * 1024;  // dynamic shared memory a kernel may ask for

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

// A decode step (L = 1) splits each query's keys over kSplits blocks (flash
// decoding): at batch 1 a block per head would leave most of the SMs idle
// while it walks a long cache. kSplits is fixed, not fitted to the batch or
// the card, so that a sequence's result depends on its own length only (the
// same bits alone or in a batch, recorded or not), and each query's
// partials are combined in split order: deterministic. Several queries (the
// prefill of heads too wide for the flash kernel) fill the card by
// themselves and take one split each (no scratch of kSplits per query).
constexpr int kSplits = 32;
constexpr int kTile = 64;  // keys a block scores per pass (two per lane)
constexpr int kKeysPerWarp = kTile / (kThreads / 32);

int splits_of(const AttentionLaunch& a) { return a.L == 1 ? kSplits : 1; }

// The key tiles [first, end) of split g of `splits` for a query that sees n
// keys, and how many splits have any (the others exit at once).
struct SplitRange {
  int64_t first, end, used;
  __device__ static SplitRange of(int64_t n, int64_t g, int64_t splits) {
    const int64_t tiles = (n + kTile - 1) / kTile, per = (tiles + splits - 1) / splits;
    return {g * per, std::min(tiles, (g + 1) * per), (tiles + per - 1) / per};
  }
};

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Column slots of the P V sums: for head dims under the block's width,
// `groups` threads share a column, each summing every groups-th key.
__host__ __device__ int64_t value_groups(int64_t hd) { return hd >= kThreads ? 1 : kThreads / hd; }

// Shared floats of decode_split_kernel: q, the tile's scores and their
// exponentials, the column slots.
int64_t decode_floats(int64_t hd) { return hd + 2 * kTile + value_groups(hd) * hd; }

// Where the partial of (query row, head, split) starts in the scratch: its
// running max m, its sum of exponentials l, then sum_s exp(score_s - m) V[s]
// (hd floats).
__device__ int64_t partial_at(const AttentionLaunch& a, int64_t rh, int64_t g, int64_t splits) {
  return (rh * splits + g) * (a.hd + 2);
}

// A block per (query row, head, split) of kThreads: its tiles of keys with
// the online softmax, in F32 (scores by a warp per key, lanes across the
// head; P V by threads across the head, groups of them over the keys).
// 8 blocks a multiprocessor: 64 registers, no spills (128 unbounded), for
// more loads in flight on a memory-bound walk.
__global__ void __launch_bounds__(kThreads, 8) decode_split_kernel(AttentionLaunch a, float* part) {
  const int64_t splits = gridDim.y;
  extern __shared__ float sm[];
  const int64_t rh = blockIdx.x, row = rh / a.H, h = rh % a.H, b = row / a.L, t = row % a.L;
  const int64_t n = a.past[b] + t + 1;
  const SplitRange r = SplitRange::of(n, blockIdx.y, splits);
  if (r.first >= r.end) return;
  const int64_t hd = a.hd, j = h / (a.H / a.Hkv), groups = value_groups(hd), slots = groups * hd;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float* qs = sm;
  float* scores = qs + hd;
  float* probs = scores + kTile;
  float* acc = probs + kTile;
  const float* q = a.qkv.p + row * a.qkv.stride + h * hd;
  for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) qs[e] = q[e];
  for (int64_t i = threadIdx.x; i < slots; i += blockDim.x) acc[i] = 0.f;
  const float* K = a.k_cache + (b * a.Hkv + j) * a.capacity * hd;
  const float* V = a.v_cache + (b * a.Hkv + j) * a.capacity * hd;
  float m = -INFINITY, l = 0.f;  // l: thread 0's
  __syncthreads();
  for (int64_t kt = r.first; kt < r.end; ++kt) {
    const int64_t s0 = kt * kTile;
    const int cnt = static_cast<int>(std::min<int64_t>(kTile, n - s0));
    // A warp's kKeysPerWarp rows, their loads issued together (each key's
    // sum in the order of e, then the butterfly).
    const float* Kt = K + (s0 + warp * kKeysPerWarp) * hd;
    float d[kKeysPerWarp] = {};
    for (int64_t e = lane; e < hd; e += 32) {
      const float qe = qs[e];
#pragma unroll
      for (int u = 0; u < kKeysPerWarp; ++u)
        if (warp * kKeysPerWarp + u < cnt) d[u] += qe * Kt[u * hd + e];
    }
#pragma unroll
    for (int u = 0; u < kKeysPerWarp; ++u) {
      const int k = warp * kKeysPerWarp + u;
      const float x = warp_sum(d[u]);
      if (lane == 0) scores[k] = k < cnt ? a.scale * x : -INFINITY;
    }
    __syncthreads();
    // Every warp finds the same maximum (fmaxf's order does not matter).
    const float mx = fmaxf(m, warp_max(fmaxf(scores[lane], scores[lane + 32])));
    const float alpha = expf(m - mx);  // 0 on the first tile
    m = mx;
    if (threadIdx.x < kTile) probs[threadIdx.x] = expf(scores[threadIdx.x] - mx);  // 0 past cnt
    __syncthreads();
    if (warp == 0) {
      const float sum = warp_sum(probs[lane] + probs[lane + 32]);
      l = l * alpha + sum;
    }
    for (int64_t i = threadIdx.x; i < slots; i += blockDim.x) {
      const int64_t e = i % hd;
      float x = 0.f;
      for (int64_t k = i / hd; k < cnt; k += groups) x += probs[k] * V[(s0 + k) * hd + e];
      acc[i] = acc[i] * alpha + x;
    }
  }
  __syncthreads();
  float* out = part + partial_at(a, rh, blockIdx.y, splits);
  if (threadIdx.x == 0) {
    out[0] = m;
    out[1] = l;
  }
  for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
    float x = acc[e];
    for (int64_t g = 1; g < groups; ++g) x += acc[g * hd + e];
    out[2 + e] = x;
  }
}

// A block per (query row, head): the used splits' partials rescaled to
// their common maximum and summed in split order.
__global__ void decode_combine_kernel(AttentionLaunch a, const float* part, int splits) {
  __shared__ float w[kSplits];
  const int64_t rh = blockIdx.x, row = rh / a.H, h = rh % a.H, b = row / a.L, t = row % a.L;
  const int64_t used = SplitRange::of(a.past[b] + t + 1, 0, splits).used;
  const float* p0 = part + partial_at(a, rh, 0, splits);
  const int64_t pitch = a.hd + 2;
  float mx = -INFINITY;
  for (int64_t g = 0; g < used; ++g) mx = fmaxf(mx, p0[g * pitch]);
  if (static_cast<int64_t>(threadIdx.x) < used) w[threadIdx.x] = expf(p0[threadIdx.x * pitch] - mx);
  __syncthreads();
  float den = 0.f;
  for (int64_t g = 0; g < used; ++g) den += w[g] * p0[g * pitch + 1];
  const float inv = 1.f / den;
  float* o = a.out.p + row * a.out.stride + h * a.hd;
  for (int64_t e = threadIdx.x; e < a.hd; e += blockDim.x) {
    float x = 0.f;
    for (int64_t g = 0; g < used; ++g) x += w[g] * p0[g * pitch + 2 + e];
    o[e] = x * inv;
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
                         static_cast<int>(kMaxShared));
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

int64_t attention_decode_scratch(const AttentionLaunch& a) {
  return attention_tiled(a) ? 0 : a.B * a.L * a.H * splits_of(a) * (a.hd + 2);
}

int64_t attention_decode_max_head_dim() {
  // decode_floats(hd) <= kMaxShared / 4, with value_groups(hd) = 1 there.
  return (kMaxShared / int64_t{sizeof(float)} - 2 * kTile) / 2;
}

void launch_attention(const AttentionLaunch& a, float* scratch, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  if (attention_tiled(a)) {
    if (a.split)
      launch_flash_split<true>(a, s);
    else
      launch_flash_split<false>(a, s);
    return;
  }
  // Sized for the longest query a batch could hold; splits past a query's
  // keys exit at once (the lengths may be on the device only).
  const auto smem = static_cast<size_t>(decode_floats(a.hd)) * sizeof(float);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(decode_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  const auto rows = static_cast<unsigned>(a.B * a.L * a.H);
  const int splits = splits_of(a);
  decode_split_kernel<<<dim3(rows, static_cast<unsigned>(splits)), kThreads, smem, s>>>(a, scratch);
  decode_combine_kernel<<<rows, kThreads, 0, s>>>(a, scratch, splits);
}

}  // namespace ssm::cuda
