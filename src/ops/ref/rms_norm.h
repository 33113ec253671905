// The reference norm kernels as templates on the element type: float in the
// backend's table, double (F64 tensors) for finite-difference tests.
#pragma once

#include "ssm/ops/rms_norm.h"

namespace ssm::ref {

template <typename T>
void rms_norm(Context& ctx, const ops::RmsNormArgs& a);
template <typename T>
void rms_norm_backward(Context& ctx, const ops::RmsNormBackwardArgs& a);
template <typename T>
void gated_rms_norm(Context& ctx, const ops::GatedRmsNormArgs& a);
template <typename T>
void gated_rms_norm_backward(Context& ctx, const ops::GatedRmsNormBackwardArgs& a);

}  // namespace ssm::ref
