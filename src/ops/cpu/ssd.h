// The cpu Mamba-2 kernels, one file each; ssd.cpp puts them in the table.
#pragma once

#include "ssm/ops/ssd.h"

namespace ssm::cpu {

void ssd_prepare(Context& ctx, const ops::SsdPrepareArgs& a);                   // ssd_prepare.cpp
void ssd_prepare_backward(Context& ctx, const ops::SsdPrepareBackwardArgs& a);  // ssd_prepare.cpp
void ssd_scan_chunked(Context& ctx, const ops::SsdScanArgs& a);                 // ssd_scan.cpp
void ssd_step(Context& ctx, const ops::SsdScanArgs& a);                         // ssd_step.cpp
void ssd_decode_step(Context& ctx, const ops::SsdStepArgs& a);                  // ssd_step.cpp
void ssd_scan_backward(Context& ctx, const ops::SsdScanBackwardArgs& a);  // ssd_scan_backward.cpp

}  // namespace ssm::cpu
