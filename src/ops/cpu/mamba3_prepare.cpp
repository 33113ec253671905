// The per-step inputs and outputs around the Mamba-3 scan (SPEC §4): the
// elementwise parts of the mixer, kept out of the scan so that the scan's
// two forms share them and a backward pass can see every intermediate.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ssm/ops/activations.h"
#include "ssm/ops/mamba3_scan.h"

namespace ssm::ops {
namespace {

// The "heavy tail" map: positive, 1 + v above zero, 1 / (1 - v) below.
inline float heavy_tail(float v) { return v >= 0.f ? 1.f + v : 1.f / (1.f - v); }

// 1 / sqrt(mean(x^2) + eps), summed in double like ops::rms_norm.
inline float inv_rms(const float* x, int64_t n, float eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(n) + eps));
}

// out = RMSNorm(in) * w over n entries.
inline void normalize(const float* in, const float* w, int64_t n, float eps, float* out) {
  const float s = inv_rms(in, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s * w[i];
}

// Per row: B and C normed for every (rank, group), and the angle rates.
void prepare_rows(const Mamba3PrepareArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.length, [&a](int64_t row0, int64_t row1) {
    const int64_t N = a.d_state, RG = a.rank * a.groups, S = a.n_angles;
    constexpr float kPi = std::numbers::pi_v<float>;
    for (int64_t row = row0; row < row1; ++row) {
      for (int64_t i = 0; i < RG; ++i) {
        normalize(a.B + row * a.ld + i * N, a.B_norm, N, a.norm_eps,
                  a.B_normed + (row * RG + i) * N);
        normalize(a.C + row * a.ld + i * N, a.C_norm, N, a.norm_eps,
                  a.C_normed + (row * RG + i) * N);
      }
      for (int64_t j = 0; j < S; ++j)
        a.ang_rate[row * S + j] = kPi * std::tanh(a.ang[row * a.ld + j]);
    }
  });
}

// Per (b, h): the step scalars, the phase walk, q, k and v.
void prepare_heads(const Mamba3PrepareArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.heads, [&a](int64_t i0, int64_t i1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, G = a.groups;
    const int64_t R = a.rank, S = a.n_angles;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, g = h / (H / G);
      float* phase = a.phase + i * S;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t, step = i * L + t;
        const float dt = softplus(a.ddt[row * a.ld + h] + a.dt_bias[h]);
        a.dt[step] = dt;
        a.A[step] = std::min(-heavy_tail(a.ddA[row * a.ld + h]), -a.A_floor);
        a.lam[step] = sigmoid(a.trap[row * a.ld + h]);
        const float* rate = a.ang_rate + row * S;
        for (int64_t j = 0; j < S; ++j) phase[j] += rate[j] * dt;
        if (a.phases) std::copy(phase, phase + S, a.phases + step * S);

        float* q = a.q + step * R * N;
        float* k = a.k + step * R * N;
        float* v = a.v + step * R * P;
        const float* x = a.x + row * a.ld + h * P;
        for (int64_t r = 0; r < R; ++r) {
          const float* cn = a.C_normed + (row * R * G + r * G + g) * N;
          const float* bn = a.B_normed + (row * R * G + r * G + g) * N;
          const float* cb = a.C_bias + (h * R + r) * N;
          const float* bb = a.B_bias + (h * R + r) * N;
          for (int64_t n = 0; n < N; ++n) {
            q[r * N + n] = cn[n] + cb[n];
            k[r * N + n] = bn[n] + bb[n];
          }
          const float* mx = a.mimo_x ? a.mimo_x + (h * R + r) * P : nullptr;
          for (int64_t p = 0; p < P; ++p) v[r * P + p] = mx ? x[p] * mx[p] : x[p];
        }
        for (int64_t j = 0; j < S; ++j) {
          const float c = std::cos(phase[j]), s = std::sin(phase[j]);
          for (int64_t r = 0; r < R; ++r) {
            rotate_pair(q + r * N, a.pairs, N / 2, j, c, s);
            rotate_pair(k + r * N, a.pairs, N / 2, j, c, s);
          }
        }
      }
    }
  });
}

}  // namespace

void mamba3_prepare(const Mamba3PrepareArgs& a, ThreadPool& pool) {
  // Each lambda captures one reference, which keeps its std::function from
  // allocating (this runs on every decode step).
  prepare_rows(a, pool);
  prepare_heads(a, pool);
}

void mamba3_output(const Mamba3OutputArgs& a, ThreadPool& pool) {
  pool.parallel_for(a.batch * a.length, [&a](int64_t row0, int64_t row1) {
    const int64_t L = a.length, H = a.heads, P = a.headdim, R = a.rank;
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t b = row / L, t = row % L;
      for (int64_t h = 0; h < H; ++h) {
        const float* z = a.z + row * a.ld_z + h * P;
        float* y = a.y + row * a.ld_y + h * P;
        std::fill(y, y + P, 0.f);
        for (int64_t r = 0; r < R; ++r) {
          const float* o = a.o + (((b * H + h) * L + t) * R + r) * P;
          const int64_t hr = (h * R + r) * P;
          const float s = a.norm ? inv_rms(o, P, a.norm_eps) : 1.f;
          for (int64_t p = 0; p < P; ++p) {
            const float zr = a.mimo_z ? z[p] * a.mimo_z[hr + p] : z[p];
            float val = o[p] * silu(zr);
            if (a.norm) val *= s * a.norm[h * P + p];
            y[p] += a.mimo_o ? val * a.mimo_o[hr + p] : val;
          }
        }
      }
    }
  });
}

}  // namespace ssm::ops
