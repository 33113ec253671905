// norm_linear as its definition: rms_norm or gated_rms_norm into a
// workspace, then linear. ops::norm_linear runs it where the backend has no
// kernel of its own; a backend's kernel falls back to it for shapes it does
// not take.
#pragma once

#include "ssm/ops/linear.h"

namespace ssm::ops::detail {

void norm_linear_composed(Context& ctx, const NormLinearArgs& a);

}  // namespace ssm::ops::detail
