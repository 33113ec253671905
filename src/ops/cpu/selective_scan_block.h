// The forward recurrence of the Mamba-1 selective scan over a block of
// channels, vectorised across the channels (Highway, chosen at run time for
// the CPU): each channel's N states advance with one exp per state and step,
// and that exp, scalar, was most of a Mamba-1 prefill.
#pragma once

#include <cstdint>

#include "ssm/ops/selective_scan.h"

namespace ssm::cpu {

// Channels per block: a multiple of every x86 vector's float lanes.
inline constexpr int64_t kScanBlock = 16;
// The largest state size the block keeps on the stack.
inline constexpr int64_t kScanMaxN = 256;

// selective_scan for channels [d0, d1) of sequence b, d1 - d0 <= kScanBlock,
// N <= kScanMaxN: y, and the state when a.state is defined.
void selective_scan_block(const ops::SelectiveScanArgs& a, int64_t b, int64_t d0, int64_t d1);

}  // namespace ssm::cpu
