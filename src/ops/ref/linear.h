// The reference linear kernels as templates on the element type of the
// activations: float in the backend's table, double for tests that check
// the backward against finite differences of the forward (their tensors are
// then F64, W included).
#pragma once

#include "ssm/ops/linear.h"

namespace ssm::ref {

template <typename T>
void linear(Context& ctx, const ops::LinearArgs& a);
template <typename T>
void linear_backward(Context& ctx, const ops::LinearBackwardArgs& a);

}  // namespace ssm::ref
