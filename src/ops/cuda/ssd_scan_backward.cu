// The SSD scan's backward in the chunked form: parallel over (batch row,
// head, chunk of Q steps), with only two short sequential passes over the
// chunks (L / Q steps each) for the states that cross chunk boundaries.
//
// Within chunk c (steps c0 .. c0+len-1), with cs_t = sum_{u=c0..t} dt_u A
// (the log decay from the chunk's start, inclusive):
//   S_t  = exp(cs_t) S0 + sum_{s<=t} exp(cs_t - cs_s) dt_s x_s B_s^T
//   dS_t = exp(cs_last - cs_t) F + sum_{t'>=t} exp(cs_t' - cs_t) dy_t' C_t'^T
// where S0 is the state before the chunk and F the gradient reaching the
// state after it from later chunks. Then
//   dx_t  = dt_t dS_t B_t + D dy_t,   dB^h_t = dt_t dS_t^T x_t,   dC^h_t = S_t^T dy_t
// are sums of Q x Q products inside the chunk plus one product with S0 or F.
// The decay's gradient uses d/d(log a_u) = sum_{j>=u} g_j with
//   g_j = <C_j, dC^h_j> - <B_j, dB^h_j>
// (the log decay enters every path from a source s to an output t as
// exp(c_t - c_s)), a reverse cumulative sum over time per (b, h):
//   ddt_u = x_u^T dS_u B_u + A sum_{j>=u} g_j,   dA += sum_u dt_u sum_{j>=u} g_j.
// Passes:
//   1 chunk_sums      per chunk: its own end state (sources in the chunk)
//                     and its state gradient at its start (outputs in it)
//   2 chunk_pass      per (b, h, p, n), over chunks: S0 and F of each chunk
//   3 chunk_backward  per chunk: dx, x^T dS B, dB^h, dC^h, dD's part
//   4 decay_terms     per (row, h): g (the tiles' chunk_backward: in it)
//   5 decay_cumsum    per (b, h), a reverse scan over time: ddt, dA's part
//   6 group_sums      dB, dC: the heads of a group summed in order
//   7 head_sums       dA, dD: batch rows and chunks summed in order
// Every sum has a fixed order: results repeat bit for bit.
#include <algorithm>

#include "ops/cuda/float_runs.h"
#include "ops/cuda/launch_train.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxSmem = 200 * 1024;  // of the H200's 227 KiB per block

struct Chunk {
  int64_t b, h, g, c, c0, row0;
  int len;
};

__device__ Chunk chunk_of(const SsdScanBackwardLaunch& a, int64_t block) {
  const int64_t nc = (a.L + a.Q - 1) / a.Q;
  Chunk k;
  k.c = block % nc;
  k.h = (block / nc) % a.H;
  k.b = block / (nc * a.H);
  k.g = k.h / (a.H / a.G);
  k.c0 = k.c * a.Q;
  k.row0 = k.b * a.L + k.c0;
  k.len = static_cast<int>(min(a.Q, a.L - k.c0));
  return k;
}

// Loads the chunk's dt and its inclusive log-decay sums.
__device__ void load_decay(const SsdScanBackwardLaunch& a, const Chunk& k, float* sdt, float* scs) {
  for (int t = threadIdx.x; t < k.len; t += blockDim.x)
    sdt[t] = a.dt.p[(k.row0 + t) * a.dt.stride + k.h];
  __syncthreads();
  if (threadIdx.x == 0) {
    const float A = a.A[k.h];
    float acc = 0;
    for (int t = 0; t < k.len; ++t) scs[t] = acc += sdt[t] * A;
  }
  __syncthreads();
}

// rows x cols of src (row stride ld) into dst with row stride dld. The
// tiles' rows are padded by one float (dld = cols + 1) so that threads
// reading one column of successive rows hit different banks.
__device__ void load_tile(float* dst, int64_t dld, const float* src, int64_t ld, int rows,
                          int64_t cols) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int64_t t = i / cols, j = i % cols;
    dst[t * dld + j] = src[t * ld + j];
  }
}

// The chunk's inputs in shared memory: dt, cs, then padded tiles of x, dy
// (Q x P) and B, C (Q x N).
struct Tiles {
  float *dt, *cs, *x, *dy, *B, *C;
  int64_t lp, ln;  // padded row strides
  __device__ float* end(int64_t Q) const { return C + Q * ln; }
};

__device__ Tiles load_chunk(const SsdScanBackwardLaunch& a, const Chunk& k, float* smem) {
  const int64_t P = a.P, N = a.N, Q = a.Q;
  Tiles s;
  s.lp = P + 1;
  s.ln = N + 1;
  s.dt = smem;
  s.cs = s.dt + Q;
  s.x = s.cs + Q;
  s.dy = s.x + Q * s.lp;
  s.B = s.dy + Q * s.lp;
  s.C = s.B + Q * s.ln;
  load_decay(a, k, s.dt, s.cs);
  load_tile(s.x, s.lp, a.x.p + k.row0 * a.x.stride + k.h * P, a.x.stride, k.len, P);
  load_tile(s.dy, s.lp, a.dy.p + k.row0 * a.dy.stride + k.h * P, a.dy.stride, k.len, P);
  load_tile(s.B, s.ln, a.Bm.p + k.row0 * a.Bm.stride + k.g * N, a.Bm.stride, k.len, N);
  load_tile(s.C, s.ln, a.C.p + k.row0 * a.C.stride + k.g * N, a.C.stride, k.len, N);
  return s;
}

size_t tiles_floats(int64_t P, int64_t N, int64_t Q) {
  return 2 * Q + 2 * Q * (P + 1) + 2 * Q * (N + 1);
}

__global__ void chunk_sums_kernel(SsdScanBackwardLaunch a) {
  extern __shared__ float smem[];
  const Chunk k = chunk_of(a, blockIdx.x);
  const int64_t P = a.P, N = a.N, Q = a.Q;
  const Tiles s = load_chunk(a, k, smem);
  float* wsrc = s.end(Q);  // Q: exp(cs_last - cs_t) dt_t, a source's weight at the chunk's end
  float* wout = wsrc + Q;  // Q: exp(cs_t), the chunk's start state's weight at output t
  __syncthreads();
  const float last = s.cs[k.len - 1];
  for (int t = threadIdx.x; t < k.len; t += blockDim.x) {
    wsrc[t] = expf(last - s.cs[t]) * s.dt[t];
    wout[t] = expf(s.cs[t]);
  }
  __syncthreads();
  const int64_t out = ((k.b * a.H + k.h) * ((a.L + Q - 1) / Q) + k.c) * P * N;
  for (int64_t i = threadIdx.x; i < P * N; i += blockDim.x) {
    const int64_t p = i / N, n = i % N;
    double sum = 0, dsum = 0;
    for (int t = 0; t < k.len; ++t) {
      sum += wsrc[t] * s.x[t * s.lp + p] * s.B[t * s.ln + n];
      dsum += wout[t] * s.dy[t * s.lp + p] * s.C[t * s.ln + n];
    }
    a.states[out + i] = static_cast<float>(sum);
    a.dstates[out + i] = static_cast<float>(dsum);
  }
  if (threadIdx.x == 0) a.decay[out / (P * N)] = expf(last);
}

// Thread per (b, h) and W consecutive (p, n): S0 of each chunk forward, F
// of each backward (walk_chunk_states), W = 4 floats a load where aligned:
// four times the bytes in flight for the registers they take.
template <int W>
__global__ void chunk_pass_kernel(SsdScanBackwardLaunch a) {
  const int64_t PN = a.P * a.N, nc = (a.L + a.Q - 1) / a.Q;
  const int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * W;
  if (i >= a.B * a.H * PN) return;
  const int64_t bh = i / PN, e = i % PN;
  const float* decay = a.decay + bh * nc;
  float* S = a.states + bh * nc * PN + e;   // forward over chunks
  float* F = a.dstates + bh * nc * PN + e;  // backward
  double run_s[W], run_f[W];
  for (int w = 0; w < W; ++w) {
    run_s[w] = a.state0 ? a.state0[i + w] : 0.f;
    run_f[w] = 0;
  }
  walk_chunk_states<W>(S, F, decay, nc, PN, run_s, run_f);
}

__global__ void chunk_backward_kernel(SsdScanBackwardLaunch a) {
  extern __shared__ float smem[];
  const Chunk k = chunk_of(a, blockIdx.x);
  const int64_t P = a.P, N = a.N, Q = a.Q, H = a.H;
  const Tiles s = load_chunk(a, k, smem);
  float* M1 = s.end(Q);        // (t', t): exp(cs_t' - cs_t) C_t'.B_t, t' >= t
  float* M2 = M1 + Q * Q;      // (t', t): exp(cs_t' - cs_t) dy_t'.x_t, t' >= t
  float* dSB = M2 + Q * Q;     // (t, p): (dS_t B_t)[p]
  float* Ft = dSB + Q * P;     // (n, p): F transposed, rows padded
  float* red = Ft + N * s.lp;  // kThreads: the dD reduction
  const int64_t nc = (a.L + Q - 1) / Q;
  const int64_t base = ((k.b * H + k.h) * nc + k.c) * P * N;
  const float* S0 = a.states + base;
  const float* F = a.dstates + base;
  for (int64_t i = threadIdx.x; i < P * N; i += blockDim.x) Ft[(i % N) * s.lp + i / N] = F[i];
  __syncthreads();
  const int len = k.len;
  const float last = s.cs[len - 1];
  for (int i = threadIdx.x; i < len * len; i += blockDim.x) {
    const int tp = i / len, t = i % len;
    float cb = 0, dx = 0;
    if (tp >= t) {
      for (int64_t n = 0; n < N; ++n) cb += s.C[tp * s.ln + n] * s.B[t * s.ln + n];
      for (int64_t p = 0; p < P; ++p) dx += s.dy[tp * s.lp + p] * s.x[t * s.lp + p];
      const float e = expf(s.cs[tp] - s.cs[t]);
      cb *= e;
      dx *= e;
    }
    M1[tp * Q + t] = cb;
    M2[tp * Q + t] = dx;
  }
  __syncthreads();
  const float Dh = a.D ? a.D[k.h] : 0.f;
  float dD = 0;
  for (int64_t i = threadIdx.x; i < len * P; i += blockDim.x) {
    const int t = static_cast<int>(i / P);
    const int64_t p = i % P;
    double fb = 0;
    for (int64_t n = 0; n < N; ++n) fb += Ft[n * s.lp + p] * s.B[t * s.ln + n];
    double acc = expf(last - s.cs[t]) * fb;
    for (int tp = t; tp < len; ++tp) acc += M1[tp * Q + t] * s.dy[tp * s.lp + p];
    dSB[t * P + p] = static_cast<float>(acc);
    const float dyv = s.dy[t * s.lp + p];
    a.dx.p[(k.row0 + t) * a.dx.stride + k.h * P + p] = static_cast<float>(s.dt[t] * acc + Dh * dyv);
    dD += dyv * s.x[t * s.lp + p];
  }
  red[threadIdx.x] = dD;
  __syncthreads();
  for (int t = threadIdx.x; t < len; t += blockDim.x) {
    double acc = 0;
    for (int64_t p = 0; p < P; ++p) acc += s.x[t * s.lp + p] * dSB[t * P + p];
    a.ddt.p[(k.row0 + t) * a.ddt.stride + k.h] = static_cast<float>(acc);  // decay terms: pass 5
  }
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int j = 0; j < static_cast<int>(blockDim.x); ++j) sum += red[j];
    // The chunk's decay is no longer needed (pass 2 used it): its slot holds dD's part.
    a.decay[base / (P * N)] = sum;
  }
  for (int64_t i = threadIdx.x; i < len * N; i += blockDim.x) {
    const int t = static_cast<int>(i / N);
    const int64_t n = i % N;
    double fx = 0, sy = 0;
    for (int64_t p = 0; p < P; ++p) {
      fx += Ft[n * s.lp + p] * s.x[t * s.lp + p];
      sy += S0[p * N + n] * s.dy[t * s.lp + p];
    }
    double db = expf(last - s.cs[t]) * fx, dc = expf(s.cs[t]) * sy;
    for (int tp = t; tp < len; ++tp) db += M2[tp * Q + t] * s.C[tp * s.ln + n];
    for (int u = 0; u <= t; ++u) dc += M2[t * Q + u] * s.dt[u] * s.B[u * s.ln + n];
    const int64_t o = ((k.row0 + t) * H + k.h) * N + n;
    a.dBh[o] = static_cast<float>(s.dt[t] * db);
    a.dCh[o] = static_cast<float>(dc);
  }
}

// Warp per (row, h): g = <C, dC^h> - <B, dB^h>.
__global__ void decay_terms_kernel(SsdScanBackwardLaunch a) {
  const int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= a.B * a.L * a.H) return;
  const int64_t row = w / a.H, h = w % a.H, g = h / (a.H / a.G);
  const float* Bt = a.Bm.p + row * a.Bm.stride + g * a.N;
  const float* Ct = a.C.p + row * a.C.stride + g * a.N;
  const float* dB = a.dBh + w * a.N;
  const float* dC = a.dCh + w * a.N;
  // g is a difference of two sums that nearly cancel: summed in double.
  double acc = 0;
  for (int64_t n = lane; n < a.N; n += 32)
    acc += static_cast<double>(Ct[n]) * dC[n] - static_cast<double>(Bt[n]) * dB[n];
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) a.g[w] = static_cast<float>(acc);
}

// Block per (b, h): the reverse cumulative sum over time, in double, as a
// two-level scan: each thread sums its own run of steps, thread 0 turns the
// run sums into suffix sums, then each thread walks its run backwards.
__global__ void decay_cumsum_kernel(SsdScanBackwardLaunch a) {
  __shared__ double part[kThreads];
  const int64_t b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int64_t per = (a.L + kThreads - 1) / kThreads, t0 = threadIdx.x * per;
  const int64_t t1 = t0 + per < a.L ? t0 + per : a.L;
  const float* g = a.g + b * a.L * a.H + h;
  double own = 0;
  for (int64_t t = t0; t < t1; ++t) own += g[t * a.H];
  part[threadIdx.x] = own;
  __syncthreads();
  if (threadIdx.x == 0) {
    double after = 0;  // part[j] becomes the sum of the runs after run j
    for (int j = kThreads - 1; j >= 0; --j) {
      const double v = part[j];
      part[j] = after;
      after += v;
    }
  }
  __syncthreads();
  const double A = a.A[h];
  double G = part[threadIdx.x], dA = 0;
  for (int64_t t = t1 - 1; t >= t0; --t) {
    const int64_t row = b * a.L + t;
    G += g[t * a.H];
    float& ddt = a.ddt.p[row * a.ddt.stride + h];
    ddt = static_cast<float>(ddt + A * G);
    dA += a.dt.p[row * a.dt.stride + h] * G;
  }
  __syncthreads();
  part[threadIdx.x] = dA;
  __syncthreads();
  for (int o = kThreads / 2; o > 0; o /= 2) {
    if (threadIdx.x < o) part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) a.sums[blockIdx.x] = static_cast<float>(part[0]);
}

// Thread per (row, g, n).
__global__ void group_sums_kernel(SsdScanBackwardLaunch a) {
  const int64_t GN = a.G * a.N, n_all = a.B * a.L * GN, per = a.H / a.G;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_all;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / GN, gn = i % GN, g = gn / a.N, n = gn % a.N;
    float db = 0, dc = 0;
    for (int64_t h = g * per; h < (g + 1) * per; ++h) {
      db += a.dBh[(row * a.H + h) * a.N + n];
      dc += a.dCh[(row * a.H + h) * a.N + n];
    }
    a.dB.p[row * a.dB.stride + gn] = db;
    a.dC.p[row * a.dC.stride + gn] = dc;
  }
}

// Thread per head.
__global__ void head_sums_kernel(SsdScanBackwardLaunch a) {
  const int64_t h = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (h >= a.H) return;
  const int64_t nc = (a.L + a.Q - 1) / a.Q;
  double dA = 0, dD = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    dA += a.sums[b * a.H + h];
    for (int64_t c = 0; c < nc; ++c) dD += a.decay[(b * a.H + h) * nc + c];
  }
  a.dA[h] = static_cast<float>(a.dA[h] + dA);
  if (a.dD) a.dD[h] = static_cast<float>(a.dD[h] + dD);
}

size_t sums_smem(int64_t P, int64_t N, int64_t Q) {
  return sizeof(float) * (tiles_floats(P, N, Q) + 2 * Q);
}
size_t backward_smem(int64_t P, int64_t N, int64_t Q) {
  return sizeof(float) * (tiles_floats(P, N, Q) + 2 * Q * Q + Q * P + N * (P + 1) + kThreads);
}

unsigned blocks(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

int64_t ssd_backward_chunk(int64_t P, int64_t N, bool split) {
  int64_t Q = 64;
  if (!split && ssd_backward_tiles_fit(P, N)) return Q;
  while (Q > 1 && backward_smem(P, N, Q) > kMaxSmem) Q /= 2;
  return Q;
}

int64_t ssd_backward_scratch(int64_t B, int64_t L, int64_t H, int64_t P, int64_t N, int64_t Q) {
  const int64_t nc = (L + Q - 1) / Q;
  return 2 * B * H * nc * P * N + B * H * nc + 2 * B * L * H * N + B * L * H + B * H;
}

void launch_ssd_scan_backward(const SsdScanBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.L * a.H == 0) return;
  const int64_t nc = (a.L + a.Q - 1) / a.Q;
  const unsigned chunks = static_cast<unsigned>(a.B * a.H * nc);
  // Passes 1 and 3 on the tensor cores when the context rounds its products
  // and their tiles fit; else the general kernels here (any chunk length,
  // sums in double). The exact path keeps the double sums: with F32
  // accumulators (3xTF32) the decay's gradient g = <C, dC^h> - <B, dB^h>,
  // a difference of nearly equal sums, lost too much (dA 5.4e-5 relative
  // against ref on an H200, SsdScanBackwardTest's tolerance 1e-5).
  const bool tiles = !a.split && a.Q == 64 && ssd_backward_tiles_fit(a.P, a.N);
  const size_t s1 = sums_smem(a.P, a.N, a.Q), s3 = backward_smem(a.P, a.N, a.Q);
  if (tiles) {
    launch_ssd_chunk_sums_tiles(a, s);
  } else {
    cudaFuncSetAttribute(chunk_sums_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(s1));
    chunk_sums_kernel<<<chunks, kThreads, s1, s>>>(a);
  }
  const int64_t entries = a.B * a.H * a.P * a.N;
  const bool vec = (a.P * a.N) % 4 == 0 && reinterpret_cast<uintptr_t>(a.states) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.dstates) % 16 == 0;
  if (vec)
    chunk_pass_kernel<4><<<blocks(entries / 4, kThreads), kThreads, 0, s>>>(a);
  else
    chunk_pass_kernel<1><<<blocks(entries, kThreads), kThreads, 0, s>>>(a);
  if (tiles && a.f16 && a.cb && ssd_backward_f16_fit(a.P, a.N)) {
    launch_ssd_chunk_backward_f16(a, s);
  } else if (tiles) {
    launch_ssd_chunk_backward_tiles(a, s);
  } else {
    cudaFuncSetAttribute(chunk_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(s3));
    chunk_backward_kernel<<<chunks, kThreads, s3, s>>>(a);
  }
  if (!tiles)  // the tiles' chunk_backward writes g itself
    decay_terms_kernel<<<blocks(a.B * a.L * a.H * 32, kThreads), kThreads, 0, s>>>(a);
  decay_cumsum_kernel<<<static_cast<unsigned>(a.B * a.H), kThreads, 0, s>>>(a);
  const int64_t gb = (a.B * a.L * a.G * a.N + kThreads - 1) / kThreads;
  group_sums_kernel<<<static_cast<unsigned>(std::min<int64_t>(gb, 65535 * 16)), kThreads, 0, s>>>(
      a);
  head_sums_kernel<<<blocks(a.H, 64), 64, 0, s>>>(a);
}

}  // namespace ssm::cuda
