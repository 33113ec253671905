// The kernels of launch_hybrid_backward.h.
//
// The selective scan backward keeps the forward's layout (a channel's N
// state entries over S lanes of a warp, in registers) and walks time back
// like ref: every state is needed again, so a first pass runs the
// recurrence forward and keeps the state at the start of each chunk of
// kChunk steps (a checkpoint), then, from the last chunk, the chunk's
// states are recomputed into scratch and its steps taken back. Each thread
// reads back only its own entries, so those passes need no barrier. dB and
// dC sum over every channel: per step, the block's channels are summed in
// shared memory in channel order into a partial row of their block, and a
// second kernel sums the blocks' rows in order; dA_log, dt_bias and D sum
// over the batch rows the same way (per-(b, d) values, then b in order).
// No floating-point atomics: a run repeats bit for bit.
#include <algorithm>

#include "ops/cuda/launch_hybrid_backward.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 64;  // steps between checkpoints

__device__ float sigmoidf_(float x) {
  return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x));
}
__device__ double sigmoid_d(double x) {
  return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
__device__ float silu_(float z) { return z * sigmoidf_(z); }
__device__ float silu_grad_(float z) {
  const float s = sigmoidf_(z);
  return s * (1.f + z * (1.f - s));
}
__device__ float softplus_(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 16));
}

__global__ void relu_squared_backward_kernel(ConstRows x, Rows d) {
  const int64_t n = d.rows * d.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / d.cols, c = i % d.cols;
    d.p[r * d.stride + c] *= 2.f * fmaxf(0.f, x.p[r * x.stride + c]);
  }
}

__global__ void gelu_product_backward_kernel(ConstRows gate, ConstRows t, Rows dgate, Rows d) {
  const int64_t n = d.rows * d.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / d.cols, c = i % d.cols;
    const float v = gate.p[r * gate.stride + c];
    float* dp = d.p + r * d.stride + c;
    const float dout = *dp, cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
    dgate.p[r * dgate.stride + c] =
        dout * t.p[r * t.stride + c] * (cdf + v * expf(-0.5f * v * v) * 0.39894228040143268f);
    *dp = dout * v * cdf;
  }
}

// Lanes per channel (a power of two, at most 32) and entries per lane: the
// forward scan's choice (hybrid_kernels.cu), at most 8 entries a lane.
int lanes_for(int64_t N) {
  int S = 1;
  while (S < 32 && (N + S - 1) / S > 8) S *= 2;
  while (S < 32 && S < N && S < 4) S *= 2;
  return S;
}

struct ScanScratch {
  float *ckpt, *chunk, *part, *par;
  int64_t chunks, blocks;  // checkpoints per (b, d); channel blocks per batch row
};

ScanScratch scan_scratch(const SelectiveScanBackwardLaunch& a) {
  const int64_t per_block = kThreads / lanes_for(a.N);
  ScanScratch s;
  s.chunks = (a.L + kChunk - 1) / kChunk;
  s.blocks = (a.D + per_block - 1) / per_block;
  s.ckpt = a.scratch;
  s.chunk = s.ckpt + a.B * a.D * s.chunks * a.N;
  s.part = s.chunk + a.B * a.D * (kChunk + 1) * a.N;
  s.par = s.part + 2 * a.B * a.L * s.blocks * a.N;
  return s;
}

// Sum over the S lanes of a channel (xor within aligned groups of S).
__device__ float lanes_sum(float v, int S) {
  for (int o = S / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, S);
  return v;
}

template <int PER>
__global__ void selective_scan_backward_kernel(SelectiveScanBackwardLaunch a, ScanScratch sc,
                                               int S) {
  extern __shared__ float red[];  // [2][per_block][N]: this step's dB and dC per channel
  const int per_block = kThreads / S;
  const int64_t b = blockIdx.x / sc.blocks, blk = blockIdx.x % sc.blocks;
  const int ch = threadIdx.x / S, j = threadIdx.x % S;
  const int64_t d = blk * per_block + ch;
  const bool active = d < a.D;
  const int64_t dc = active ? d : a.D - 1;  // idle channels compute on a real one, write nothing
  const int N = static_cast<int>(a.N);
  const int64_t bd = b * a.D + dc;
  float* ckpt = sc.ckpt + bd * sc.chunks * a.N;
  float* states = sc.chunk + bd * (kChunk + 1) * a.N;
  float st[PER], A[PER], dA[PER], ds[PER];
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    const int n = j + S * e;
    st[e] = (n < N && a.state0) ? a.state0[bd * a.N + n] : 0.f;
    A[e] = n < N ? -expf(a.A_log[dc * a.N + n]) : 0.f;
    dA[e] = 0.f;
    ds[e] = 0.f;
  }
  const float bias = a.dt_bias ? a.dt_bias[dc] : 0.f, Dd = a.Dskip ? a.Dskip[dc] : 0.f;
  // One step of the recurrence on this lane's entries.
  auto advance = [&](int64_t t) {
    const int64_t r = b * a.L + t;
    const float dt = softplus_(a.dt_raw.p[r * a.dt_raw.stride + dc] + bias);
    const float du = dt * a.x.p[r * a.x.stride + dc];
    const float* Bt = a.Bm.p + r * a.Bm.stride;
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j + S * e;
      if (n < N) st[e] = expf(dt * A[e]) * st[e] + du * Bt[n];
    }
  };
  auto keep = [&](float* dst) {
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j + S * e;
      if (n < N && active) dst[n] = st[e];
    }
  };
  for (int64_t t = 0; t < a.L; ++t) {
    if (t % kChunk == 0) keep(ckpt + (t / kChunk) * a.N);
    advance(t);
  }
  double dbias = 0, dskip = 0;
  for (int64_t c = sc.chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * kChunk, t1 = t0 + kChunk < a.L ? t0 + kChunk : a.L;
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j + S * e;
      st[e] = (n < N && active) ? ckpt[c * a.N + n] : 0.f;
    }
    keep(states);
    for (int64_t t = t0; t < t1; ++t) {
      advance(t);
      keep(states + (t - t0 + 1) * a.N);
    }
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const int64_t r = b * a.L + t;
      // The states after and before step t (idle channels: zeros, their
      // channel's scratch belongs to another thread).
      const float* St = states + (t - t0 + 1) * a.N;
      const float* Sp = states + (t - t0) * a.N;
      auto at = [&](const float* v, int n) { return active ? v[n] : 0.f; };
      const float* Bt = a.Bm.p + r * a.Bm.stride;
      const float* Ct = a.C.p + r * a.C.stride;
      const float u = a.x.p[r * a.x.stride + dc];
      const float raw = a.dt_raw.p[r * a.dt_raw.stride + dc] + bias, dt = softplus_(raw);
      float dpre = a.dy.p[r * a.dy.stride + dc];
      if (a.z.p) {
        float pre = 0.f;
#pragma unroll
        for (int e = 0; e < PER; ++e) {
          const int n = j + S * e;
          if (n < N) pre += at(St, n) * Ct[n];
        }
        pre = lanes_sum(pre, S) + Dd * u;
        const float zv = a.z.p[r * a.z.stride + dc];
        if (active && j == 0) a.dz.p[r * a.dz.stride + dc] = dpre * pre * silu_grad_(zv);
        dpre *= silu_(zv);
      }
      float du = 0.f, ddt = 0.f;
#pragma unroll
      for (int e = 0; e < PER; ++e) {
        const int n = j + S * e;
        if (n >= N) continue;
        const float dsn = ds[e] + dpre * Ct[n], decay = expf(dt * A[e]);
        red[ch * N + n] = active ? dsn * dt * u : 0.f;
        red[(per_block + ch) * N + n] = active ? dpre * St[n] : 0.f;
        du += dsn * dt * Bt[n];
        ddt += dsn * (A[e] * decay * at(Sp, n) + u * Bt[n]);
        dA[e] += dsn * dt * decay * at(Sp, n);
        ds[e] = dsn * decay;
      }
      du = lanes_sum(du, S);
      ddt = lanes_sum(ddt, S);
      if (active && j == 0) {
        a.dx.p[r * a.dx.stride + dc] = du + dpre * Dd;
        const float draw = ddt * sigmoidf_(raw);
        a.ddt_raw.p[r * a.ddt_raw.stride + dc] = draw;
        dbias += draw;
        dskip += static_cast<double>(dpre) * u;
      }
      __syncthreads();
      // This block's channels summed in channel order: (dB | dC) of row r.
      for (int i = threadIdx.x; i < 2 * N; i += blockDim.x) {
        const int w = i / N, n = i % N;
        float acc = 0.f;
        for (int q = 0; q < per_block; ++q) acc += red[(w * per_block + q) * N + n];
        sc.part[((w * a.B * a.L + r) * sc.blocks + blk) * a.N + n] = acc;
      }
      __syncthreads();
    }
  }
  if (!active) return;
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    const int n = j + S * e;
    if (n < N) sc.par[bd * a.N + n] = dA[e] * A[e];
  }
  if (j == 0) {
    sc.par[a.B * a.D * a.N + bd] = static_cast<float>(dbias);
    sc.par[a.B * a.D * (a.N + 1) + bd] = static_cast<float>(dskip);
  }
}

// dB and dC of each row: the channel blocks' partial rows summed in order.
__global__ void selective_dbc_kernel(SelectiveScanBackwardLaunch a, ScanScratch sc) {
  const int64_t n_all = 2 * a.B * a.L * a.N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_all;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t w = i / (a.B * a.L * a.N), r = (i / a.N) % (a.B * a.L), n = i % a.N;
    const float* p = sc.part + (w * a.B * a.L + r) * sc.blocks * a.N + n;
    float acc = 0.f;
    for (int64_t q = 0; q < sc.blocks; ++q) acc += p[q * a.N];
    const Rows& o = w == 0 ? a.dB : a.dC;
    o.p[r * o.stride + n] = acc;
  }
}

// The parameter gradients: per-(b, d) values summed over b in order.
__global__ void selective_params_kernel(SelectiveScanBackwardLaunch a, ScanScratch sc) {
  const int64_t n_all = a.D * (a.N + 2);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_all;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* dst;
    const float* src;
    int64_t step;
    if (i < a.D * a.N) {  // dA_log[d, n]
      dst = a.dA_log ? a.dA_log + i : nullptr;
      src = sc.par + i;
      step = a.D * a.N;
    } else {  // ddt_bias[d], then dD[d]
      const int64_t w = (i - a.D * a.N) / a.D, d = (i - a.D * a.N) % a.D;
      dst = w == 0 ? (a.ddt_bias ? a.ddt_bias + d : nullptr) : (a.dD ? a.dD + d : nullptr);
      src = sc.par + a.B * a.D * (a.N + w) + d;
      step = a.D;
    }
    if (!dst) continue;
    float acc = 0.f;
    for (int64_t b = 0; b < a.B; ++b) acc += src[b * step];
    *dst += acc;
  }
}

// A thread per token, in double (the header's rules, as ref).
__global__ void moe_route_backward_kernel(int router, bool normalize, float scale, ConstRows logits,
                                          const int64_t* chosen, int64_t k, ConstRows dweights,
                                          Rows dlogits) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= logits.rows) return;
  const int64_t E = logits.cols;
  const float* l = logits.p + t * logits.stride;
  const float* dw = dweights.p + t * dweights.stride;
  const int64_t* c = chosen + t * k;
  float* out = dlogits.p + t * dlogits.stride;
  for (int64_t e = 0; e < E; ++e) out[e] = 0.f;
  if (router == 0) {  // softmax over the chosen logits
    double mx = l[c[0]], sum = 0, dot = 0;
    for (int64_t i = 1; i < k; ++i) mx = fmax(mx, static_cast<double>(l[c[i]]));
    for (int64_t i = 0; i < k; ++i) sum += exp(l[c[i]] - mx);
    for (int64_t i = 0; i < k; ++i) dot += exp(l[c[i]] - mx) / sum * dw[i];
    for (int64_t i = 0; i < k; ++i)
      out[c[i]] = static_cast<float>(exp(l[c[i]] - mx) / sum * (dw[i] - dot));
  } else if (router == 1) {  // softmax over all, the chosen probabilities kept
    double mx = l[0], sum = 0, dot = 0;
    for (int64_t e = 1; e < E; ++e) mx = fmax(mx, static_cast<double>(l[e]));
    for (int64_t e = 0; e < E; ++e) sum += exp(l[e] - mx);
    for (int64_t i = 0; i < k; ++i) dot += exp(l[c[i]] - mx) / sum * dw[i];
    for (int64_t e = 0; e < E; ++e) {
      const double p = exp(l[e] - mx) / sum;
      double g = -p * dot;
      for (int64_t i = 0; i < k; ++i)
        if (c[i] == e) g += p * dw[i];
      out[e] = static_cast<float>(g);
    }
  } else {  // sigmoid scores, normalised and scaled
    double S = 0, dot = 0;
    for (int64_t i = 0; i < k; ++i) S += sigmoid_d(l[c[i]]);
    S += 1e-20;
    for (int64_t i = 0; i < k; ++i) dot += dw[i] * sigmoid_d(l[c[i]]);
    for (int64_t i = 0; i < k; ++i) {
      const double p = sigmoid_d(l[c[i]]);
      const double g =
          normalize ? scale * (dw[i] - dot / S) / S : static_cast<double>(scale) * dw[i];
      out[c[i]] = static_cast<float>(g * p * (1.0 - p));
    }
  }
}

// A warp per pair p = t k + j: the dot product over D in lanes, then a
// fixed xor tree.
__global__ void expert_output_dot_kernel(ConstRows dout, ConstRows ys, const int64_t* pos,
                                         int64_t k, Rows dweights) {
  const int64_t p = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t P = dout.rows * k;
  const bool live = p < P;
  const int64_t pc = live ? p : P - 1;
  const float* g = dout.p + (pc / k) * dout.stride;
  const float* y = ys.p + pos[pc] * ys.stride;
  float acc = 0.f;
  for (int64_t c = lane; c < dout.cols; c += 32) acc += g[c] * y[c];
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (live && lane == 0) dweights.p[(pc / k) * dweights.stride + pc % k] = acc;
}

__global__ void gather_weighted_kernel(ConstRows dout, ConstRows weights, const int64_t* sorted,
                                       int64_t k, Rows out) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols, p = sorted[r];
    out.p[r * out.stride + c] =
        weights.p[(p / k) * weights.stride + p % k] * dout.p[(p / k) * dout.stride + c];
  }
}

__global__ void expert_act_kernel(ConstRows h, int64_t F, bool gated, Rows act) {
  const int64_t n = h.rows * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float* row = h.p + (i / F) * h.stride;
    const int64_t c = i % F;
    const float v = fmaxf(row[c], 0.f);
    act.p[(i / F) * act.stride + c] = gated ? silu_(row[c]) * row[c + F] : v * v;
  }
}

__global__ void expert_act_backward_kernel(ConstRows h, ConstRows dact, int64_t F, bool gated,
                                           Rows dh) {
  const int64_t n = h.rows * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / F, c = i % F;
    const float* hr = h.p + r * h.stride;
    float* out = dh.p + r * dh.stride;
    // dh may be h itself: both of a pair's inputs are read before either is written.
    const float g = dact.p[r * dact.stride + c], hg = hr[c], hv = gated ? hr[F + c] : 0.f;
    if (gated) {
      out[F + c] = g * silu_(hg);
      out[c] = g * hv * silu_grad_(hg);
    } else {
      out[c] = g * 2.f * fmaxf(0.f, hg);
    }
  }
}

}  // namespace

void launch_relu_squared_backward(ConstRows x, Rows d, cudaStream_t s) {
  if (d.rows * d.cols == 0) return;
  relu_squared_backward_kernel<<<blocks_for(d.rows * d.cols), kThreads, 0, s>>>(x, d);
}

void launch_gelu_product_backward(ConstRows gate, ConstRows t, Rows dgate, Rows d, cudaStream_t s) {
  if (d.rows * d.cols == 0) return;
  gelu_product_backward_kernel<<<blocks_for(d.rows * d.cols), kThreads, 0, s>>>(gate, t, dgate, d);
}

int64_t selective_scan_backward_scratch(int64_t B, int64_t L, int64_t D, int64_t N) {
  const int64_t per_block = kThreads / lanes_for(N), blocks = (D + per_block - 1) / per_block;
  const int64_t chunks = (L + kChunk - 1) / kChunk;
  return B * D * chunks * N + B * D * (kChunk + 1) * N + 2 * B * L * blocks * N + B * D * (N + 2);
}

void launch_selective_scan_backward(const SelectiveScanBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.D == 0) return;
  const int S = lanes_for(a.N);
  const ScanScratch sc = scan_scratch(a);
  const int64_t need = (a.N + S - 1) / S;
  const unsigned grid = static_cast<unsigned>(a.B * sc.blocks);
  const size_t smem = sizeof(float) * 2 * (kThreads / S) * a.N;  // at most 16 KB (8 entries a lane)
  if (need <= 1)
    selective_scan_backward_kernel<1><<<grid, kThreads, smem, s>>>(a, sc, S);
  else if (need <= 2)
    selective_scan_backward_kernel<2><<<grid, kThreads, smem, s>>>(a, sc, S);
  else if (need <= 4)
    selective_scan_backward_kernel<4><<<grid, kThreads, smem, s>>>(a, sc, S);
  else
    selective_scan_backward_kernel<8><<<grid, kThreads, smem, s>>>(a, sc, S);
  selective_dbc_kernel<<<blocks_for(2 * a.B * a.L * a.N), kThreads, 0, s>>>(a, sc);
  selective_params_kernel<<<blocks_for(a.D * (a.N + 2)), kThreads, 0, s>>>(a, sc);
}

void launch_moe_route_backward(int router, bool normalize, float scale, ConstRows logits,
                               const int64_t* chosen, int64_t k, ConstRows dweights, Rows dlogits,
                               cudaStream_t s) {
  if (logits.rows == 0) return;
  const unsigned grid = static_cast<unsigned>((logits.rows + kThreads - 1) / kThreads);
  moe_route_backward_kernel<<<grid, kThreads, 0, s>>>(router, normalize, scale, logits, chosen, k,
                                                      dweights, dlogits);
}

void launch_expert_output_dot(ConstRows dout, ConstRows ys, const int64_t* pos, int64_t k,
                              Rows dweights, cudaStream_t s) {
  const int64_t P = dout.rows * k;
  if (P == 0) return;
  const unsigned grid = static_cast<unsigned>((P * 32 + kThreads - 1) / kThreads);
  expert_output_dot_kernel<<<grid, kThreads, 0, s>>>(dout, ys, pos, k, dweights);
}

void launch_gather_weighted(ConstRows dout, ConstRows weights, const int64_t* sorted, int64_t k,
                            Rows out, cudaStream_t s) {
  if (out.rows * out.cols == 0) return;
  gather_weighted_kernel<<<blocks_for(out.rows * out.cols), kThreads, 0, s>>>(dout, weights, sorted,
                                                                              k, out);
}

void launch_expert_act(ConstRows h, int64_t F, bool gated, Rows act, cudaStream_t s) {
  if (h.rows * F == 0) return;
  expert_act_kernel<<<blocks_for(h.rows * F), kThreads, 0, s>>>(h, F, gated, act);
}

void launch_expert_act_backward(ConstRows h, ConstRows dact, int64_t F, bool gated, Rows dh,
                                cudaStream_t s) {
  if (h.rows * F == 0) return;
  expert_act_backward_kernel<<<blocks_for(h.rows * F), kThreads, 0, s>>>(h, dact, F, gated, dh);
}

}  // namespace ssm::cuda
