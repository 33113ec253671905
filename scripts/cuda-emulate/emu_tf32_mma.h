// The emulator's versions of src/ops/cuda/tf32_mma.h (transform.py includes
// this in its place): TF32 rounding as cvt.rna (to nearest, ties away from
// zero, 10 mantissa bits), the m16n8k8 product from every lane's fragments
// (PTX's layouts; the sums in double, so not the tensor cores' bits), and the
// asynchronous copies done at once.
#pragma once
#include <cstdint>
#include <cstring>

#include "emu.h"

namespace ssm::cuda {

inline float tf32_value(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;  // half of the dropped 13 bits' unit
  return u & 0xffffe000u;
}

inline void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - tf32_value(hi));
}

inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const std::array<float, 8> mine{tf32_value(a[0]), tf32_value(a[1]), tf32_value(a[2]), tf32_value(a[3]),
                                  tf32_value(b0),   tf32_value(b1),   0.f,              0.f};
  const auto all = emu::warp_gather(mine);
  // A (16 x 8): lane (r % 8) * 4 + k % 4 holds (r, k) in a[(r >= 8) + 2 (k >= 4)];
  // B (8 x 8): lane n * 4 + k % 4 holds (k, n) in b[k >= 4].
  const auto A = [&](int r, int k) { return all[(r % 8) * 4 + k % 4][(r >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)]; };
  const auto B = [&](int k, int n) { return all[n * 4 + k % 4][4 + (k >= 4 ? 1 : 0)]; };
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, tg = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * tg + (e & 1);
    double s = c[e];
    for (int k = 0; k < 8; ++k) s += static_cast<double>(A(row, k)) * B(k, col);
    c[e] = static_cast<float>(s);
  }
}

inline void copy16_async(float* dst_smem, const float* src) { std::memcpy(dst_smem, src, 16); }
inline void wait_async() {}
inline void commit_async() {}
template <int kPending>
void wait_async_pending() {}

}  // namespace ssm::cuda
