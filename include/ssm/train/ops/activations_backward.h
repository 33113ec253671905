// Derivatives of the scalar activations in ops/activations.h.
#pragma once

#include "ssm/ops/activations.h"

namespace ssm::ops {

// d/dx [x sigmoid(x)] = s (1 + x (1 - s)).
inline float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.f + x * (1.f - s));
}
// d/dx log(1 + e^x) = sigmoid(x).
inline float softplus_grad(float x) { return sigmoid(x); }

}  // namespace ssm::ops
