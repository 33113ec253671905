// The cpu attention backward kernels (attention_backward.cpp), which
// attention.cpp enters into the table with the forward ones.
#pragma once

#include "ssm/ops/attention.h"

namespace ssm::cpu {

void attention_backward(Context& ctx, const ops::AttentionBackwardArgs& a);
void rope_backward(Context& ctx, const ops::RopeBackwardArgs& a);

}  // namespace ssm::cpu
