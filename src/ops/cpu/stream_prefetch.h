// Software prefetch for the decode kernels that stream an operand once (the
// weights of a matrix-vector product, the SSM state of a step). The hardware
// prefetchers alone kept one core's BF16 and int8 matrix-vector kernels at
// 78-85% of a plain streaming read on the Intel host of 2026-12-07 (Xeon,
// family 6 model 207); asking for each line 4 KiB ahead brought both to
// 92-100% (docs/CPU.md, "Decode: software prefetch of the weight and state
// streams"). A prefetch never faults, so asking past an operand's end is
// harmless (a wasted line at most).
#pragma once

#include <cstdint>

namespace ssm::cpu {

constexpr int64_t kStreamPrefetchBytes = 4096;

// Asks for the cache line kStreamPrefetchBytes past p, into L1 (for reading).
// The address is formed as an integer: a pointer past its object's end
// would be undefined behaviour even if never dereferenced.
inline void prefetch_stream_ahead(const void* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kStreamPrefetchBytes), 0, 3);
}

}  // namespace ssm::cpu
