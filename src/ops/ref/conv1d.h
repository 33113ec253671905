// The reference conv1d kernels as templates on the element type: float in
// the backend's table, double (F64 tensors) for finite-difference tests.
#pragma once

#include "ssm/ops/conv1d.h"

namespace ssm::ref {

template <typename T>
void conv1d(Context& ctx, const ops::Conv1dArgs& a);
template <typename T>
void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a);

}  // namespace ssm::ref
