// Vectorised elementwise passes of the backward kernels (Highway, chosen at
// run time for the CPU), replacing scalar loops with a std::exp per element.
// Every element gets the same lane-wise arithmetic wherever it sits (a short
// tail goes through a full vector), so values do not depend on run lengths.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// g[i] *= SiLU'(pre[i]), SiLU'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
void mul_silu_grad(const float* pre, float* g, int64_t n);

// The backward of out = y SiLU(z) given g = dout: dy[i] = g[i] SiLU(z[i]),
// dz[i] = g[i] y[i] SiLU'(z[i]) (one exponential per element for both).
void silu_gate_backward(const float* y, const float* z, const float* g, float* dy, float* dz,
                        int64_t n);

// One AdamW step over n elements as PyTorch's formula (the scalar loop's
// operations, one per lane, no fused multiply-adds): the moments and the
// parameter in double,
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g g   (stored as float)
//   p = p decay - lr u,
// the step u = (m / bc1) / (sqrt(v / bc2) + eps) from the stored moments in
// float (bc1, bc2, eps rounded to float): in double its two divisions and
// square root per element bound the pass by the divider. u is within a few
// float ulps of the double formula, a relative 1e-7 of lr u.
struct AdamwConstants {
  double b1, b2, bc1, bc2, decay, lr, eps;
};
void adamw_update(const AdamwConstants& k, float* p, const float* g, float* m, float* v, int64_t n);

}  // namespace ssm::cpu
