// The cpu Mamba-3 kernels (SPEC §4), one file each; mamba3.cpp puts them in
// the op table. Ports of the tuned raw-pointer kernels: the chunked scan and
// its backward on small single-threaded matrix products, the sequential step
// for decoding, parallel over (batch row, head) or rows. Every result is
// independent of the thread count.
#pragma once

#include "ssm/ops/mamba3.h"

namespace ssm::cpu {

void mamba3_prepare(Context& ctx, const ops::Mamba3PrepareArgs& a);
void mamba3_prepare_backward(Context& ctx, const ops::Mamba3PrepareBackwardArgs& a);
void mamba3_scan(Context& ctx, const ops::Mamba3ScanArgs& a);
void mamba3_prepare_scan(Context& ctx, const ops::Mamba3PrepareScanArgs& a);
void mamba3_scan_backward(Context& ctx, const ops::Mamba3ScanBackwardArgs& a);
void mamba3_output(Context& ctx, const ops::Mamba3OutputArgs& a);
void mamba3_output_backward(Context& ctx, const ops::Mamba3OutputBackwardArgs& a);

}  // namespace ssm::cpu
