// Chunked SSD. Phase 1 forms, for every (batch row, group, chunk), the score
// matrix C B^T that all heads of the group share. Phase 2 runs each (batch
// row, head) through its chunks: intra-chunk outputs from the masked, decayed
// scores, the carried state's contribution, then the state update. Every
// exponent is a difference cs_t - cs_s with s <= t, hence <= 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ssm/ops/gemm.h"
#include "ssm/ops/ssd_scan.h"

namespace ssm::ops {
namespace {

// exp of a segment sum (always <= 0). Below e^-80 the result is flushed to
// zero: it is invisible next to any fp32 sum, and subnormal products are
// many times slower on common CPUs.
inline float decay(float segment_sum) {
  return segment_sum < -80.f ? 0.f : std::exp(segment_sum);
}

}  // namespace

void ssd_scan_chunked(const SsdScanArgs& a, ThreadPool& pool) {
  const int64_t L = a.length, H = a.heads, P = a.headdim, N = a.d_state, G = a.groups;
  const int64_t Q = std::max<int64_t>(1, std::min(a.chunk, L));
  const int64_t n_chunks = (L + Q - 1) / Q;
  if (L == 0) return;

  // scores[b][g][c] = C_chunk @ B_chunk^T, (q, q) in a (Q, Q) slot.
  std::vector<float> scores(static_cast<size_t>(a.batch * G * n_chunks * Q * Q));
  pool.parallel_for(a.batch * G * n_chunks, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % n_chunks, g = (i / n_chunks) % G, b = i / (n_chunks * G);
      const int64_t t0 = c * Q, q = std::min(Q, L - t0);
      const int64_t row0 = b * L + t0;
      gemm(false, true, q, q, N, 1.f, a.C + row0 * a.ld_bc + g * N, a.ld_bc,
           a.B + row0 * a.ld_bc + g * N, a.ld_bc, 0.f, scores.data() + i * Q * Q, Q);
    }
  });

  pool.parallel_for(a.batch * H, [&](int64_t i0, int64_t i1) {
    std::vector<float> M(Q * Q), Cs(Q * N), Xw(Q * P), cs(Q);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, g = h / (H / G);
      float* S = a.state + i * P * N;
      for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t t0 = c * Q, q = std::min(Q, L - t0);
        const int64_t row0 = b * L + t0;
        const float* dt = a.dt + row0 * a.ld_dt + h;
        const float* X = a.x + row0 * a.ld_x + h * P;
        const float* Bc = a.B + row0 * a.ld_bc + g * N;
        const float* Cc = a.C + row0 * a.ld_bc + g * N;
        float* Y = a.y + row0 * a.ld_y + h * P;
        float run = 0.f;
        for (int64_t t = 0; t < q; ++t) cs[t] = run += dt[t * a.ld_dt] * a.A[h];

        const float* sc = scores.data() + ((b * G + g) * n_chunks + c) * Q * Q;
        for (int64_t t = 0; t < q; ++t) {
          for (int64_t s = 0; s <= t; ++s)
            M[t * q + s] = sc[t * Q + s] * decay(cs[t] - cs[s]) * dt[s * a.ld_dt];
          for (int64_t s = t + 1; s < q; ++s) M[t * q + s] = 0.f;
        }
        gemm(false, false, q, P, q, 1.f, M.data(), q, X, a.ld_x, 0.f, Y, a.ld_y);

        // Carried state: y_t += exp(cs_t) S C_t.
        for (int64_t t = 0; t < q; ++t) {
          const float e = decay(cs[t]);
          for (int64_t n = 0; n < N; ++n) Cs[t * N + n] = Cc[t * a.ld_bc + n] * e;
        }
        gemm(false, true, q, P, N, 1.f, Cs.data(), N, S, N, 1.f, Y, a.ld_y);

        // S <- exp(cs_end) S + sum_s exp(cs_end - cs_s) dt_s x_s B_s^T.
        const float end = cs[q - 1];
        for (int64_t s = 0; s < q; ++s) {
          const float w = decay(end - cs[s]) * dt[s * a.ld_dt];
          for (int64_t p = 0; p < P; ++p) Xw[s * P + p] = X[s * a.ld_x + p] * w;
        }
        gemm(true, false, P, N, q, 1.f, Xw.data(), P, Bc, a.ld_bc, decay(end), S, N);

        if (a.D)
          for (int64_t t = 0; t < q; ++t)
            for (int64_t p = 0; p < P; ++p) Y[t * a.ld_y + p] += a.D[h] * X[t * a.ld_x + p];
      }
    }
  });
}

}  // namespace ssm::ops
