// The reference Mamba-1 selective scan and its backward as templates on the
// element type: float in the backend's table, double (F64 tensors) for the
// finite-difference tests.
#pragma once

#include "ssm/ops/selective_scan.h"

namespace ssm::ref {

template <typename T>
void selective_scan(Context& ctx, const ops::SelectiveScanArgs& a);
template <typename T>
void selective_scan_backward(Context& ctx, const ops::SelectiveScanBackwardArgs& a);

}  // namespace ssm::ref
