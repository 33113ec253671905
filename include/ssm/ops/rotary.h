// Rotary position embedding: pairs of entries rotated by an angle,
// (a, b) -> (a cos - b sin, a sin + b cos). Attention (SPEC §5) pairs entry i
// with i + d/2 and uses fixed angles position * base^(-2i/d); Mamba-3
// (SPEC §4) uses data-dependent phases, SISO on adjacent pairs (2j, 2j+1) and
// MIMO on split halves (j, j + N/2).
#pragma once

#include <cmath>
#include <cstdint>

namespace ssm::ops {

enum class RotaryPairs {
  kAdjacent,  // angle j rotates entries (2j, 2j+1)
  kHalves,    // angle j rotates entries (j, j + half)
};

// Rotates the n_angles pairs of v in place. `half` is the distance between
// the two entries of a pair for kHalves (ignored for kAdjacent).
inline void rotate_pair(float* v, RotaryPairs pairs, int64_t half, int64_t j, float c, float s) {
  const int64_t i0 = pairs == RotaryPairs::kAdjacent ? 2 * j : j;
  const int64_t i1 = pairs == RotaryPairs::kAdjacent ? 2 * j + 1 : j + half;
  const float a = v[i0], b = v[i1];
  v[i0] = a * c - b * s;
  v[i1] = a * s + b * c;
}

inline void rotate(float* v, RotaryPairs pairs, int64_t half, const float* cos, const float* sin,
                   int64_t n_angles) {
  for (int64_t j = 0; j < n_angles; ++j) rotate_pair(v, pairs, half, j, cos[j], sin[j]);
}

// Inverse frequencies of standard RoPE over `dim` channels: base^(-2i/dim),
// i < dim/2.
inline void rope_inv_freq(int64_t dim, double base, float* inv_freq) {
  for (int64_t i = 0; i < dim / 2; ++i)
    inv_freq[i] = static_cast<float>(
        std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dim)));
}

}  // namespace ssm::ops
