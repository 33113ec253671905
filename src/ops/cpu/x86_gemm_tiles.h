// The loop of the AVX-512 prefill kernels (x86_f32_gemm.cpp and
// x86_bf16_gemm.cpp), which differ only in the tile: activation rows in
// groups of kGemmTileVectors blocks of 16 (outer, so that a group of packed
// rows stays in L2 while all of a job's weight rows pass over it), weight
// rows in tiles of kGemmTileRows. A tile's sums, plus the bias, are written
// to y or added to it. Plain C++: only the tiles need the instruction set.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ssm::cpu {

inline constexpr int kGemmTileRows = 6;     // weight rows per tile
inline constexpr int kGemmTileVectors = 4;  // blocks of 16 activation rows per tile

struct GemmTileOutput {
  int64_t n = 0;  // weight rows (output columns)
  const float* bias = nullptr;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
  bool transposed = false;  // weight rows are rows of y (y[j][m])
};

// Calls f(std::integral_constant<int, V>) for V = vectors in [1, 4], so that
// a tile's accumulators can be a compile-time array.
template <typename F>
void with_tile_vectors(int vectors, F&& f) {
  switch (vectors) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// tile(vectors, block, j0, rows, sums) fills sums[r * 64 + 16 v + lane] with
// the product of weight row j0 + r (r < rows) and activation row
// 16 (block + v) + lane (v < vectors), for M packed activation rows, and
// returns false; or returns true when it has written that tile into out
// itself, as the loop below would have.
template <typename Tile>
void for_each_gemm_tile(int64_t M, const GemmTileOutput& out, Tile&& tile) {
  const int64_t blocks = (M + 15) / 16;
  alignas(64) float sums[kGemmTileRows * 64];
  for (int64_t b0 = 0; b0 < blocks; b0 += kGemmTileVectors) {
    const int vectors = static_cast<int>(std::min<int64_t>(kGemmTileVectors, blocks - b0));
    const int64_t m0 = b0 * 16, m1 = std::min(M, m0 + 64);
    for (int64_t j0 = 0; j0 < out.n; j0 += kGemmTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kGemmTileRows, out.n - j0));
      if (tile(vectors, b0, j0, rows, sums)) continue;
      for (int64_t m = m0; m < m1; ++m)
        for (int r = 0; r < rows; ++r) {
          float& y = out.transposed ? out.y[(j0 + r) * out.ldy + m] : out.y[m * out.ldy + j0 + r];
          const float v = sums[r * 64 + (m - m0)] + (out.bias ? out.bias[j0 + r] : 0.f);
          y = out.accumulate ? y + v : v;
        }
    }
  }
}

}  // namespace ssm::cpu
