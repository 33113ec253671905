// The reference fused head and cross-entropy (ops/cross_entropy.h) as a
// template on the element type T of f, head, df and dhead: float in the op
// table, double in tests of the gradients against finite differences.
#pragma once

#include "ssm/ops/cross_entropy.h"

namespace ssm::ref {

template <typename T>
double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a);

}  // namespace ssm::ref
