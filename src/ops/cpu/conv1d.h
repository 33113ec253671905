// The cpu conv1d kernels, split over two files.
#pragma once

#include "ssm/ops/conv1d.h"

namespace ssm::cpu {

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a);  // conv1d_backward.cpp

// conv1d's decode step (a.in one time step, a.state defined) for channels
// [c0, c1) of batch row b only: their outputs, and their columns of the
// state shifted. A channel's result does not depend on the range it is
// computed in (the Mamba-2 decode step runs it per head, ssd_step.cpp).
void conv1d_step_channels(const ops::Conv1dArgs& a, int64_t b, int64_t c0, int64_t c1);  // conv1d.cpp

}  // namespace ssm::cpu
