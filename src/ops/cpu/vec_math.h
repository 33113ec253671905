// Vectorised elementwise passes of the scans and the gated norm (Highway,
// chosen at run time for the CPU), replacing scalar loops whose std::exp
// calls were a large part of prefill. Every element gets the same lane-wise
// arithmetic wherever it sits in the run (a short tail goes through a full
// vector), so a value does not depend on the length of its run.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// out[s] = a[s] * decay(top - cs[s]) * b[s] for s < n, where decay(v) is
// exp(v), flushed to 0 below -80 (see ssd_scan.cpp); a null a counts as 1.
// out may alias a or b.
void decay_products(float top, const float* cs, const float* a, const float* b, float* out,
                    int64_t n);

// The SSD chunk's masked, decayed scores: for t < q, M[t ldm + s] =
// sc[t ld_sc + s] * decay(cs[t] - cs[s]) * dt[s] for s <= t (decay as in
// decay_products, each value that function's to the bit), plus *diag on
// s = t when diag is not null, and 0 for t < s < causal_columns(t, q, 1)
// (blas.h: as far as gemm_causal reads). One call per chunk: the call per
// row of decay_products ran a few vectors and a tail through buffers on the
// stack each.
void causal_decay_matrix(const float* cs, const float* sc, int64_t ld_sc, const float* dt,
                         const float* diag, int64_t q, float* M, int64_t ldm);

// out[r ldo + i] = x[r ldx + i] * scale[r] for r < rows, i < n: the scans'
// rows of inputs times their step's decay. out may be x (ldo = ldx).
void scale_rows(const float* x, int64_t ldx, const float* scale, int64_t rows, int64_t n,
                float* out, int64_t ldo);

// out[i] = y[i] * SiLU(z[i]), SiLU(x) = x / (1 + exp(-x)); out may alias y
// or z.
void mul_silu(const float* y, const float* z, float* out, int64_t n);

// The sum of x[i]^2 in double (vector lanes added at the end).
double sum_squares(const float* x, int64_t n);

// out[i] = scale * tanh(x[i]) for i < n (Mamba-3's angle rates).
void scaled_tanh(const float* x, float scale, float* out, int64_t n);

// 1 / sqrt(sum_squares(x, n) / n + eps): the scale of an RMS norm, with the
// vectorised sum (the same to rounding as m3::inv_rms's sequential one).
double inv_rms_vec(const float* x, int64_t n, float eps);

// The largest of x[0, n), n >= 1.
float max_of(const float* x, int64_t n);

// x[i] = exp(x[i] - shift) for i < n, in place (float lanes); returns the
// sum of the new x[i] in double. The softmax of the head's loss.
double exp_shifted_sum(float* x, int64_t n, float shift);

}  // namespace ssm::cpu
