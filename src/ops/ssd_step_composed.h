// ssd_step as its definition: conv1d, ssd_prepare, ssd_scan and
// gated_rms_norm called in order on the context's backend. The ref and cpu
// backends register it as their ssd_step (their step kernels are already
// one call per op, so fusing would not pay there); the cuda backend falls
// back to it for shapes its fused kernels do not take.
#pragma once

#include "ssm/ops/ssd.h"

namespace ssm::ops::detail {

void ssd_step_composed(Context& ctx, const SsdStepArgs& a);

}  // namespace ssm::ops::detail
