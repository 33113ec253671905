// What the cpu Mamba-3 kernels share besides workspace: the shape letters of
// a prepare call and the scalar maps of SPEC §4.
#pragma once

#include <cmath>
#include <cstdint>

#include "ssm/ops/mamba3.h"

namespace ssm::cpu::m3 {

struct PrepareDims {
  int64_t B, L, H, P, N, G, R, S;
  explicit PrepareDims(const ops::Mamba3PrepareArgs& a)
      : B(a.x.dim(0)),
        L(a.x.dim(1)),
        H(a.heads),
        P(a.x.cols() / a.heads),
        N(a.B.cols() / (a.rank * a.groups)),
        G(a.groups),
        R(a.rank),
        S(a.ang.cols()) {}
};

// The "heavy tail" map of A: positive, 1 + v above zero, 1 / (1 - v) below.
template <typename T>
T heavy_tail(T v) {
  return v >= T(0) ? T(1) + v : T(1) / (T(1) - v);
}
inline double heavy_tail_grad(double v) { return v >= 0 ? 1.0 : 1.0 / ((1.0 - v) * (1.0 - v)); }

// 1 / sqrt(mean(x^2) + eps), summed in double like ops::rms_norm.
inline double inv_rms(const float* x, int64_t n, float eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return 1.0 / std::sqrt(s / static_cast<double>(n) + eps);
}

// The entries (e0, e1) that rotary angle j turns.
inline void rotary_pair(ops::RotaryPairs pairs, int64_t N, int64_t j, int64_t& e0, int64_t& e1) {
  e0 = pairs == ops::RotaryPairs::kAdjacent ? 2 * j : j;
  e1 = pairs == ops::RotaryPairs::kAdjacent ? 2 * j + 1 : j + N / 2;
}

}  // namespace ssm::cpu::m3
