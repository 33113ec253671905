// The emulator's versions of src/ops/cuda/f16_mma.h (transform.py includes
// this in its place): F32 to FP16 to nearest even (gcc's _Float16), ldmatrix
// from every lane's row addresses, and the m16n8k16 FP16 product from every
// lane's fragments (PTX's layouts; the sums in double, so not the tensor
// cores' bits).
#pragma once
#include <cstdint>
#include <cstring>

#include "emu.h"

namespace ssm::cuda {

inline uint16_t f16_bits(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

inline float f16_value(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, sizeof h);
  return static_cast<float>(h);
}

inline uint32_t pack_f16x2(float lo, float hi) {
  return uint32_t{f16_bits(lo)} | uint32_t{f16_bits(hi)} << 16;
}

namespace emu_f16 {
// Every lane's 16-byte row address (in two of warp_gather's floats).
inline std::array<const uint16_t*, 32> row_addresses(const uint16_t* row) {
  std::array<float, 8> mine{};
  std::memcpy(mine.data(), &row, sizeof row);
  const auto all = emu::warp_gather(mine);
  std::array<const uint16_t*, 32> rows;
  for (int l = 0; l < 32; ++l) std::memcpy(&rows[l], all[l].data(), sizeof rows[l]);
  return rows;
}
inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t{lo} | uint32_t{hi} << 16; }
}  // namespace emu_f16

inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
  const auto rows = emu_f16::row_addresses(row);
  const int l = static_cast<int>(threadIdx.x % 32);
  for (int i = 0; i < 4; ++i) {
    const uint16_t* p = rows[8 * i + l / 4] + 2 * (l % 4);
    r[i] = emu_f16::pair(p[0], p[1]);
  }
}

inline void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  const auto rows = emu_f16::row_addresses(row);
  const int l = static_cast<int>(threadIdx.x % 32);
  for (int i = 0; i < 4; ++i)
    r[i] = emu_f16::pair(rows[8 * i + 2 * (l % 4)][l / 4], rows[8 * i + 2 * (l % 4) + 1][l / 4]);
}

inline void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  std::array<float, 8> mine{};
  const uint32_t regs[6] = {a[0], a[1], a[2], a[3], b0, b1};
  std::memcpy(mine.data(), regs, sizeof regs);
  const auto all = emu::warp_gather(mine);
  const auto reg = [&](int lane, int i) {
    uint32_t u;
    std::memcpy(&u, &all[lane][i], sizeof u);
    return u;
  };
  const auto half = [](uint32_t u, int hi) {
    return f16_value(static_cast<uint16_t>(hi ? u >> 16 : u));
  };
  // A (16 x 16): lane (r % 8) * 4 + (k % 8) / 2 holds (r, k) in a[(r >= 8) + 2 (k >= 8)], half k %
  // 2; B (16 x 8): lane n * 4 + (k % 8) / 2 holds (k, n) in b[k >= 8], half k % 2.
  const auto A = [&](int r, int k) {
    return half(reg((r % 8) * 4 + (k % 8) / 2, (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)), k % 2);
  };
  const auto B = [&](int k, int n) {
    return half(reg(n * 4 + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0)), k % 2);
  };
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, tg = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * tg + (e & 1);
    double s = c[e];
    for (int k = 0; k < 16; ++k) s += static_cast<double>(A(row, k)) * B(k, col);
    c[e] = static_cast<float>(s);
  }
}

}  // namespace ssm::cuda
