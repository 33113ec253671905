// The reference Mamba-2 kernels as templates on the element type: float in
// the backend's table, double (F64 tensors) for finite-difference tests.
#pragma once

#include "ssm/ops/ssd.h"

namespace ssm::ref {

template <typename T>
void ssd_prepare(Context& ctx, const ops::SsdPrepareArgs& a);
template <typename T>
void ssd_prepare_backward(Context& ctx, const ops::SsdPrepareBackwardArgs& a);
template <typename T>
void ssd_scan(Context& ctx, const ops::SsdScanArgs& a);
template <typename T>
void ssd_scan_backward(Context& ctx, const ops::SsdScanBackwardArgs& a);

}  // namespace ssm::ref
