// Vectorised elementwise passes of the backward kernels (Highway, chosen at
// run time for the CPU), replacing scalar loops with a std::exp per element.
// Every element gets the same lane-wise arithmetic wherever it sits (a short
// tail goes through a full vector), so values do not depend on run lengths.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// g[i] *= SiLU'(pre[i]), SiLU'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
void mul_silu_grad(const float* pre, float* g, int64_t n);

}  // namespace ssm::cpu
