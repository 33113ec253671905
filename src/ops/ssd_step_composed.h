// ssd_step as its definition: conv1d, ssd_prepare, ssd_scan and
// gated_rms_norm called in order on the context's backend. The ref and cpu
// backends register it as their ssd_step (their step kernels are already
// one call per op, so fusing would not pay there); the cuda backend falls
// back to it for shapes its fused kernels do not take.
#pragma once

#include "ssm/ops/ssd.h"

namespace ssm::ops::detail {

void ssd_step_composed(Context& ctx, const SsdStepArgs& a);

// The step's pieces around its convolution and scan, shared with a backend's
// own step that convolves inside the scan's loop (cpu/ssd_step.cpp):
// ssd_step_begin takes the scratch from the arena and runs ssd_prepare
// (which reads neither the convolution nor the scan), scan_args are the
// scan's arguments over the convolved xbc, and ssd_step_end applies the
// gated norm when the step has one.
struct SsdStepScratch {
  Tensor xbc;  // (B, 1, C): the convolution's output
  Tensor dt, A;
  Tensor ys;   // the scan's output: a.out when ungated
  SsdScanArgs scan_args(const SsdStepArgs& a) const;
};
SsdStepScratch ssd_step_begin(Context& ctx, const SsdStepArgs& a);
void ssd_step_end(Context& ctx, const SsdStepArgs& a, const SsdStepScratch& s);

}  // namespace ssm::ops::detail
