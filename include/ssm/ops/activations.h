// Scalar activations in their numerically stable forms.
#pragma once

#include <cmath>

namespace ssm::ops {

inline float silu(float x) { return x / (1.f + std::exp(-x)); }
inline float sigmoid(float x) {
  return x >= 0 ? 1.f / (1.f + std::exp(-x)) : std::exp(x) / (1.f + std::exp(x));
}
// log(1 + e^x) without overflow for large x or loss for very negative x.
inline float softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? std::exp(x) : std::log1p(std::exp(x)));
}

}  // namespace ssm::ops
