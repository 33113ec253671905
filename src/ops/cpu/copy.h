// The cpu strided copy (copy.cpp), entered into the table by elementwise.cpp.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::cpu {

void copy(Context& ctx, const Tensor& dst, const Tensor& src);

}  // namespace ssm::cpu
