// The host side of the warp-per-row norm kernels (norms.cu, their backward
// in norms_backward.cu): which rows they take, and the instantiation by the
// 16-byte pieces a lane holds.
#pragma once

#include <cstdint>

namespace ssm::cuda {

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The fewest float4 pieces per lane (of 4, 8, 12, 16) holding n floats.
inline int pieces_for(int64_t n) { return static_cast<int>(((n + 127) / 128 + 3) / 4 * 4); }

// Launch<pieces>::run(args...) for the pieces pieces_for gave.
template <template <int> class Launch, class... Args>
void with_pieces(int pieces, Args&&... args) {
  switch (pieces) {
    case 4: Launch<4>::run(args...); break;
    case 8: Launch<8>::run(args...); break;
    case 12: Launch<12>::run(args...); break;
    default: Launch<16>::run(args...); break;
  }
}

}  // namespace ssm::cuda
