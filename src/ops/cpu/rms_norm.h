// The cpu norm kernels, split over two files.
#pragma once

#include "ssm/ops/rms_norm.h"

namespace ssm::cpu {

// rms_norm_backward.cpp
void rms_norm_backward(Context& ctx, const ops::RmsNormBackwardArgs& a);
void gated_rms_norm_backward(Context& ctx, const ops::GatedRmsNormBackwardArgs& a);

}  // namespace ssm::cpu
