// Attention backward on the GPU (ops/attention.h: fresh sequences, causal,
// grouped-query). Head dims up to 128 take the flash backward, on the tensor
// cores like the forward (attention.cu, attention_tiles.h):
//   flash_dq   a block per (sequence, head, tile of 64 queries): a pass over
//              the key tiles for each row's logsumexp, delta = rowsum(dO o O),
//              then a second pass recomputing P = exp(scale S - lse),
//              dS = P o (dO V^T - delta), dq = scale dS K; lse and delta kept
//              in `stats` for the next kernel;
//   flash_dkv  a block per (sequence, kv head, tile of 64 keys): for each
//              query head of the group and each query tile on or below the
//              diagonal, P^T and dS^T recomputed from those, dv += P^T dO,
//              dk += scale dS^T q.
// Each sums in a fixed order, with no atomics: results repeat bit for bit.
// Wider heads take the plain F32 kernels:
//   dq     a block per (sequence, head, query t): the scores of keys s <= t
//          in shared memory, softmax, delta = rowsum(dO o O), dS = P (dO V^T
//          - delta), dq = scale dS K; the row's maximum, 1 / sum and delta
//          kept for the next kernel;
//   dk dv  a block per (sequence, kv head, key s): for each query head of
//          the group, P and dS of the queries t >= s recomputed from those
//          statistics (the same float operations as above), then dk =
//          scale sum dS q and dv = sum P dO, heads and queries in order.
// rope_backward: a thread per rotary pair, the angle in double like
// append_kv. No atomics: results repeat bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/cuda/launch_mamba3_attention_backward.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"

// After the primitives it builds on.
#include "ops/cuda/attention_tiles.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 128;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

__device__ float dot(const float* x, const float* y, int64_t n) {
  float d = 0.f;
  for (int64_t e = 0; e < n; ++e) d += x[e] * y[e];
  return d;
}

__global__ void __launch_bounds__(kThreads) dq_kernel(AttentionBackwardLaunch a) {
  extern __shared__ float p[];  // L: scores, then dS
  __shared__ float scratch[kThreads / 32];
  const int64_t row = blockIdx.x / a.H, h = blockIdx.x % a.H, b = row / a.L, t = row % a.L;
  const int64_t hd = a.hd, j = h / (a.H / a.Hkv), n = t + 1;
  const float* q = a.q.p + row * a.q.stride + h * hd;
  const float* o = a.out.p + row * a.out.stride + h * hd;
  const float* go = a.dout.p + row * a.dout.stride + h * hd;
  const float* K = a.k + (b * a.Hkv + j) * a.L * hd;
  const float* V = a.v + (b * a.Hkv + j) * a.L * hd;
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < n; s += kThreads) {
    p[s] = a.scale * dot(q, K + s * hd, hd);
    mx = fmaxf(mx, p[s]);
  }
  mx = block_reduce(mx, true, scratch);
  float sum = 0.f;
  for (int64_t s = threadIdx.x; s < n; s += kThreads) sum += p[s] = expf(p[s] - mx);
  sum = block_reduce(sum, false, scratch);
  const float inv = 1.f / sum;
  float dl = 0.f;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) dl += go[e] * o[e];
  const float delta = block_reduce(dl, false, scratch);
  // Each thread rewrites its own scores as dS.
  for (int64_t s = threadIdx.x; s < n; s += kThreads)
    p[s] = p[s] * inv * (dot(go, V + s * hd, hd) - delta);
  __syncthreads();
  float* dq = a.dq.p + row * a.dq.stride + h * hd;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
    float acc = 0.f;
    for (int64_t s = 0; s < n; ++s) acc += p[s] * K[s * hd + e];
    dq[e] = a.scale * acc;
  }
  if (threadIdx.x == 0) {
    const int64_t BHL = a.B * a.H * a.L, at = (b * a.H + h) * a.L + t;
    a.stats[at] = mx;
    a.stats[BHL + at] = inv;
    a.stats[2 * BHL + at] = delta;
  }
}

__global__ void __launch_bounds__(kThreads) dkv_kernel(AttentionBackwardLaunch a) {
  extern __shared__ float smem[];
  const int64_t L = a.L, hd = a.hd, group = a.H / a.Hkv;
  const int64_t s = blockIdx.x % L, bj = blockIdx.x / L, b = bj / a.Hkv, j = bj % a.Hkv;
  float* pw = smem;             // L - s: P of queries t >= s
  float* dsw = smem + L;        // L - s: dS
  float* acc_k = smem + 2 * L;  // hd, entry e by its own thread
  float* acc_v = acc_k + hd;    // hd
  const float* Ks = a.k + ((b * a.Hkv + j) * L + s) * hd;
  const float* Vs = a.v + ((b * a.Hkv + j) * L + s) * hd;
  const int64_t BHL = a.B * a.H * L;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) acc_k[e] = acc_v[e] = 0.f;
  for (int64_t h = j * group; h < (j + 1) * group; ++h) {
    for (int64_t t = s + threadIdx.x; t < L; t += kThreads) {
      const int64_t row = b * L + t, st = (b * a.H + h) * L + t;
      const float* q = a.q.p + row * a.q.stride + h * hd;
      const float* go = a.dout.p + row * a.dout.stride + h * hd;
      const float pr = expf(a.scale * dot(q, Ks, hd) - a.stats[st]) * a.stats[BHL + st];
      pw[t - s] = pr;
      dsw[t - s] = pr * (dot(go, Vs, hd) - a.stats[2 * BHL + st]);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
      float ak = 0.f, av = 0.f;
      for (int64_t t = s; t < L; ++t) {
        const int64_t row = b * L + t;
        ak += dsw[t - s] * a.q.p[row * a.q.stride + h * hd + e];
        av += pw[t - s] * a.dout.p[row * a.dout.stride + h * hd + e];
      }
      acc_k[e] += a.scale * ak;
      acc_v[e] += av;
    }
    __syncthreads();  // pw and dsw read by all before the next head writes them
  }
  const int64_t row = b * L + s;
  for (int64_t e = threadIdx.x; e < hd; e += kThreads) {
    a.dk.p[row * a.dk.stride + j * hd + e] = acc_k[e];
    a.dv.p[row * a.dv.stride + j * hd + e] = acc_v[e];
  }
}

__global__ void rope_backward_kernel(Rows dq, Rows dk, int64_t L, int64_t H, int64_t Hkv,
                                     int64_t hd, const float* inv_freq, int64_t half) {
  const int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t per_row = (H + Hkv) * half;
  if (u >= dq.rows * per_row) return;
  const int64_t row = u / per_row, head = (u % per_row) / half, i = u % half;
  float* x =
      head < H ? dq.p + row * dq.stride + head * hd : dk.p + row * dk.stride + (head - H) * hd;
  double sn, cs;
  sincos(static_cast<double>(row % L) * static_cast<double>(inv_freq[i]), &sn, &cs);
  // The gradient of a rotation goes back through the opposite rotation.
  const double x0 = x[i], x1 = x[i + half];
  x[i] = static_cast<float>(x0 * cs + x1 * sn);
  x[i + half] = static_cast<float>(-x0 * sn + x1 * cs);
}

// The flash kernels' geometry and shared memory (floats): dq's Q, dO, K, V
// and a score tile; dkv's K, V, Q, dO, a score tile and a query tile's lse
// and delta.
int64_t flash_bwd_floats(int64_t hd) {
  return int64_t{attn::kRows} * (4 * attn::Pitches::of(hd).ld + attn::kScoreLd + 2);
}

struct FlashTile {
  int64_t L, tiles, tile, t0;  // t0: the tile's first row
  int rows;                    // its rows below L
  // last_first: the block order runs from the last tile (the dq kernel's
  // query tiles with the most keys first).
  __device__ static FlashTile of(int64_t L, bool last_first) {
    FlashTile f{L, (L + attn::kRows - 1) / attn::kRows, 0, 0, 0};
    f.tile = blockIdx.x % f.tiles;
    if (last_first) f.tile = f.tiles - 1 - f.tile;
    f.t0 = f.tile * attn::kRows;
    f.rows = static_cast<int>(std::min<int64_t>(attn::kRows, L - f.t0));
    return f;
  }
};

// Head h of Q and dO over the query rows [row0, row0 + rows) into their
// shared tiles (both kernels' query tiles).
__device__ void load_q_dout(const AttentionBackwardLaunch& a, float* Qs, float* dOs,
                            const attn::Pitches& pt, int64_t row0, int64_t h, int rows, bool vec) {
  const int hd = static_cast<int>(a.hd);
  tiles::load_rows(Qs, pt.ld, a.q.p + row0 * a.q.stride + h * a.hd, a.q.stride, rows, attn::kRows,
                   hd, pt.hdp, vec);
  tiles::load_rows(dOs, pt.ld, a.dout.p + row0 * a.dout.stride + h * a.hd, a.dout.stride, rows,
                   attn::kRows, hd, pt.hdp, vec);
}

template <bool kSplit, int kOT>
__global__ void __launch_bounds__(attn::kThreads, 2)
    flash_dq_kernel(AttentionBackwardLaunch a, bool vec) {
  using namespace attn;
  extern __shared__ float smem[];
  const Pitches pt = Pitches::of(a.hd);
  const int hd = static_cast<int>(a.hd), ld = pt.ld;
  const FlashTile f = FlashTile::of(a.L, true);
  const int64_t bh = blockIdx.x / f.tiles, h = bh % a.H, b = bh / a.H, j = h / (a.H / a.Hkv);
  float* Qs = smem;
  float* dOs = Qs + kRows * ld;
  float* Ks = dOs + kRows * ld;
  float* Vs = Ks + kRows * ld;
  float* Ps = Vs + kRows * ld;
  float* deltas = Ps + kRows * kScoreLd;
  const int64_t row0 = b * a.L + f.t0;
  load_q_dout(a, Qs, dOs, pt, row0, h, f.rows, vec);
  // delta a row a warp, in a fixed order (lanes' strided sums, then the butterfly).
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  for (int r = warp; r < kRows; r += kThreads / 32) {
    float d = 0.f;
    if (r < f.rows) {
      const float* o = a.out.p + (row0 + r) * a.out.stride + h * a.hd;
      const float* go = a.dout.p + (row0 + r) * a.dout.stride + h * a.hd;
      for (int e = lane; e < hd; e += 32) d += go[e] * o[e];
    }
    for (int off = 16; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);
    if (lane == 0) deltas[r] = d;
  }
  const float* Kg = a.k + (b * a.Hkv + j) * a.L * a.hd;
  const float* Vg = a.v + (b * a.Hkv + j) * a.L * a.hd;
  const int64_t last = f.t0 + f.rows, key_tiles = (last + kRows - 1) / kRows;
  const auto load = [&](float* dst, const float* src, int64_t kt) {
    tiles::load_rows(dst, ld, src + kt * kRows * a.hd, a.hd,
                     static_cast<int>(std::min<int64_t>(kRows, last - kt * kRows)), kRows, hd,
                     pt.hdp, vec);
  };
  // Keys above a row's query (and past L, above every row below L) are masked.
  const auto masked = [&](int64_t kt, int row, int col) { return kt * kRows + col > f.t0 + row; };
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  for (int64_t kt = 0; kt < key_tiles; ++kt) {
    load(Ks, Kg, kt);
    wait_async();
    __syncthreads();
    Acc s[2];
    dot_tile<kSplit>(s, Qs, Ks, ld, pt.hdp);
    float mx[2] = {m[0], m[1]};
    for_each_score(s, [&](float& x, int row, int col) {
      x = masked(kt, row, col) ? -INFINITY : a.scale * x;
      mx[row % 16 >= 8] = fmaxf(mx[row % 16 >= 8], x);
    });
    quad_reduce<true>(mx);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      l[i] *= expf(m[i] - mx[i]);
      m[i] = mx[i];
    }
    for_each_score(s,
                   [&](float& x, int row, int) { l[row % 16 >= 8] += expf(x - m[row % 16 >= 8]); });
    __syncthreads();  // K read by all before the next tile
  }
  quad_reduce<false>(l);
  const float lse[2] = {m[0] + logf(l[0]), m[1] + logf(l[1])};
  Acc dq[kOT];
#pragma unroll
  for (int c = 0; c < kOT; ++c) tiles::zero(dq[c]);
  for (int64_t kt = 0; kt < key_tiles; ++kt) {
    load(Ks, Kg, kt);
    load(Vs, Vg, kt);
    wait_async();
    __syncthreads();
    Acc s[2];
    dot_tile<kSplit>(s, Qs, Ks, ld, pt.hdp);
    for_each_score(s, [&](float& x, int row, int col) {
      at(Ps, row, col) = masked(kt, row, col) ? 0.f : expf(a.scale * x - lse[row % 16 >= 8]);
    });
    dot_tile<kSplit>(s, dOs, Vs, ld, pt.hdp);  // dP
    for_each_score(s, [&](float& x, int row, int col) {
      float& p = at(Ps, row, col);  // this thread's own P
      p *= x - deltas[row];
    });
    __syncwarp();
    times_rows<kSplit, kOT>(dq, Ps, Ks, ld, hd);
    __syncthreads();  // K, V and P read by all before the next tile
  }
  float* out = a.dq.p + row0 * a.dq.stride + h * a.hd;
  for_each_out<kOT>(dq, hd, [&](float& x, int row, int col) {
    if (row < f.rows) out[row * a.dq.stride + col] = a.scale * x;
  });
  if (threadIdx.x % 4 == 0) {
    const int64_t at0 = (b * a.H + h) * a.L + f.t0, BHL = a.B * a.H * a.L;
    const int row = 16 * warp + lane / 4;
    for (int i = 0; i < 2; ++i)
      if (row + 8 * i < f.rows) {
        a.stats[at0 + row + 8 * i] = lse[i];
        a.stats[BHL + at0 + row + 8 * i] = deltas[row + 8 * i];
      }
  }
}

template <bool kSplit, int kOT>
__global__ void __launch_bounds__(attn::kThreads, 2)
    flash_dkv_kernel(AttentionBackwardLaunch a, bool vec) {
  using namespace attn;
  extern __shared__ float smem[];
  const Pitches pt = Pitches::of(a.hd);
  const int hd = static_cast<int>(a.hd), ld = pt.ld;
  const FlashTile f = FlashTile::of(a.L, false);  // a tile of keys, the longest first
  const int64_t bj = blockIdx.x / f.tiles, j = bj % a.Hkv, b = bj / a.Hkv;
  const int64_t group = a.H / a.Hkv, BHL = a.B * a.H * a.L;
  float* Ks = smem;
  float* Vs = Ks + kRows * ld;
  float* Qs = Vs + kRows * ld;
  float* dOs = Qs + kRows * ld;
  float* Ps = dOs + kRows * ld;
  float* lses = Ps + kRows * kScoreLd;
  float* deltas = lses + kRows;
  const int64_t kv0 = ((b * a.Hkv + j) * a.L + f.t0) * a.hd;
  tiles::load_rows(Ks, ld, a.k + kv0, a.hd, f.rows, kRows, hd, pt.hdp, vec);
  tiles::load_rows(Vs, ld, a.v + kv0, a.hd, f.rows, kRows, hd, pt.hdp, vec);
  Acc dk[kOT], dv[kOT];
#pragma unroll
  for (int c = 0; c < kOT; ++c) {
    tiles::zero(dk[c]);
    tiles::zero(dv[c]);
  }
  for (int64_t h = j * group; h < (j + 1) * group; ++h)
    for (int64_t qt = f.tile; qt < f.tiles; ++qt) {
      const int64_t q0 = qt * kRows, row0 = b * a.L + q0;
      const int rows = static_cast<int>(std::min<int64_t>(kRows, a.L - q0));
      load_q_dout(a, Qs, dOs, pt, row0, h, rows, vec);
      if (threadIdx.x < kRows) {
        const int64_t at0 = (b * a.H + h) * a.L + q0 + threadIdx.x;
        const bool in = static_cast<int>(threadIdx.x) < rows;
        lses[threadIdx.x] = in ? a.stats[at0] : 0.f;
        deltas[threadIdx.x] = in ? a.stats[BHL + at0] : 0.f;
      }
      wait_async();
      __syncthreads();
      // Rows: keys f.t0 + row; columns: queries q0 + col, masked above the
      // diagonal and past L.
      const auto masked = [&](int row, int col) { return col >= rows || q0 + col < f.t0 + row; };
      Acc s[2];
      dot_tile<kSplit>(s, Ks, Qs, ld, pt.hdp);
      for_each_score(s, [&](float& x, int row, int col) {
        at(Ps, row, col) = masked(row, col) ? 0.f : expf(a.scale * x - lses[col]);
      });
      __syncwarp();
      times_rows<kSplit, kOT>(dv, Ps, dOs, ld, hd);
      dot_tile<kSplit>(s, Vs, dOs, ld, pt.hdp);  // dP^T
      __syncwarp();  // P read by the warp's lanes before it turns into dS
      for_each_score(s, [&](float& x, int row, int col) {
        float& p = at(Ps, row, col);
        p *= x - deltas[col];
      });
      __syncwarp();
      times_rows<kSplit, kOT>(dk, Ps, Qs, ld, hd);
      __syncthreads();  // Q, dO and the statistics read by all before the next tile
    }
  const int64_t row0 = b * a.L + f.t0;
  for_each_out<kOT>(dk, hd, [&](float& x, int row, int col) {
    if (row < f.rows) a.dk.p[(row0 + row) * a.dk.stride + j * a.hd + col] = a.scale * x;
  });
  for_each_out<kOT>(dv, hd, [&](float& x, int row, int col) {
    if (row < f.rows) a.dv.p[(row0 + row) * a.dv.stride + j * a.hd + col] = x;
  });
}

template <bool kSplit, int kOT>
void launch_flash_backward(const AttentionBackwardLaunch& a, cudaStream_t s) {
  const auto bytes = static_cast<size_t>(flash_bwd_floats(a.hd)) * sizeof(float);
  static const bool allowed = [] {
    cudaFuncSetAttribute(flash_dq_kernel<kSplit, kOT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int{200 * 1024});
    cudaFuncSetAttribute(flash_dkv_kernel<kSplit, kOT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int{200 * 1024});
    return true;
  }();
  (void)allowed;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = a.hd % 4 == 0 && a.q.stride % 4 == 0 && a.dout.stride % 4 == 0 &&
                   aligned(a.q.p) && aligned(a.dout.p) && aligned(a.k) && aligned(a.v);
  const int64_t tiles = (a.L + attn::kRows - 1) / attn::kRows;
  const auto q_blocks = static_cast<unsigned>(a.B * a.H * tiles);
  const auto kv_blocks = static_cast<unsigned>(a.B * a.Hkv * tiles);
  flash_dq_kernel<kSplit, kOT><<<q_blocks, attn::kThreads, bytes, s>>>(a, vec);
  flash_dkv_kernel<kSplit, kOT><<<kv_blocks, attn::kThreads, bytes, s>>>(a, vec);
}

template <bool kSplit>
void launch_flash_backward_split(const AttentionBackwardLaunch& a, cudaStream_t s) {
  switch (attn::column_groups(a.hd)) {
    case 1:
      return launch_flash_backward<kSplit, 1>(a, s);
    case 2:
      return launch_flash_backward<kSplit, 2>(a, s);
    default:
      return launch_flash_backward<kSplit, 4>(a, s);
  }
}

}  // namespace

void launch_attention_backward(const AttentionBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  if (attn::column_groups(a.hd) > 0) {
    if (a.split)
      launch_flash_backward_split<true>(a, s);
    else
      launch_flash_backward_split<false>(a, s);
    return;
  }
  const size_t smem_q = static_cast<size_t>(a.L) * sizeof(float);
  const size_t smem_kv = static_cast<size_t>(2 * a.L + 2 * a.hd) * sizeof(float);
  if (smem_q > 48 * 1024)
    cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem_q));
  if (smem_kv > 48 * 1024)
    cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem_kv));
  dq_kernel<<<static_cast<unsigned>(a.B * a.L * a.H), kThreads, smem_q, s>>>(a);
  dkv_kernel<<<static_cast<unsigned>(a.B * a.Hkv * a.L), kThreads, smem_kv, s>>>(a);
}

void launch_rope_backward(Rows dq, Rows dk, int64_t L, int64_t H, int64_t Hkv, int64_t hd,
                          const float* inv_freq, int64_t half, cudaStream_t s) {
  const int64_t n = dq.rows * (H + Hkv) * half;
  if (n == 0) return;
  rope_backward_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(dq, dk, L, H, Hkv, hd,
                                                                              inv_freq, half);
}

}  // namespace ssm::cuda
