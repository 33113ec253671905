// The cpu conv1d kernels, split over two files.
#pragma once

#include "ssm/ops/conv1d.h"

namespace ssm::cpu {

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a);  // conv1d_backward.cpp

}  // namespace ssm::cpu
