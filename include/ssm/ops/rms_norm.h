// RMSNorm over the last dimension, plain and gated per group (SPEC §1, §3).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w ; out may alias x.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out,
              ThreadPool& pool);

// Gated norm of Mamba-2: groups of `group` channels normalised separately.
// norm_before_gate=false: out = norm(y * silu(z)) * w
// norm_before_gate=true:  out = norm(y) * w * silu(z)
// z has row stride ldz. out may alias y.
void gated_rms_norm(const float* y, const float* z, int64_t ldz, const float* w, int64_t rows,
                    int64_t dim, int64_t group, float eps, bool norm_before_gate, float* out,
                    ThreadPool& pool);

}  // namespace ssm::ops
