// Pointwise activations of MLPs that are not gated by SiLU, in place:
//   relu_squared:  t = max(t, 0)^2        (Nemotron-H's relu2)
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

// t: F32 with rows, overwritten.
void relu_squared(Context& ctx, const Tensor& t);

}  // namespace ssm::ops
