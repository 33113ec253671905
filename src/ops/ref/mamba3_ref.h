// The reference Mamba-3 kernels (SPEC §4), templated on the element type of
// their tensors: the op table holds the float instances; tests also call the
// double ones directly (tensors of F64, past the op checks, which want F32)
// to check each backward against finite differences of its forward. Every
// instance computes in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ssm/ops/mamba3.h"

namespace ssm::ref {

template <typename T>
void mamba3_prepare(const ops::Mamba3PrepareArgs& a);
template <typename T>
void mamba3_prepare_backward(const ops::Mamba3PrepareBackwardArgs& a);
template <typename T>
void mamba3_scan(const ops::Mamba3ScanArgs& a);
template <typename T>
void mamba3_scan_backward(const ops::Mamba3ScanBackwardArgs& a);
template <typename T>
void mamba3_output(const ops::Mamba3OutputArgs& a);
template <typename T>
void mamba3_output_backward(const ops::Mamba3OutputBackwardArgs& a);

namespace m3 {

// A tensor's elements for writing: a Tensor is a handle to shared bytes, so
// a const handle (in a const argument struct) may still name outputs.
template <typename T>
T* out(const Tensor& t) {
  return const_cast<T*>(t.data<T>());
}
// Null for an undefined (absent) tensor.
template <typename T>
const T* in_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <typename T>
T* out_or_null(const Tensor& t) {
  return t.defined() ? out<T>(t) : nullptr;
}

// A parameter's gradient += sums kept in double; nothing when not wanted.
template <typename T>
void accumulate(const Tensor& grad, const std::vector<double>& sum) {
  if (!grad.defined()) return;
  T* p = out<T>(grad);
  for (size_t i = 0; i < sum.size(); ++i) p[i] = static_cast<T>(p[i] + sum[i]);
}

// Element (row, col) of a tensor with rows, in double.
template <typename T>
struct RowsIn {
  const T* p;
  int64_t ld;
  explicit RowsIn(const Tensor& t) : p(t.data<T>()), ld(t.row_stride()) {}
  double operator()(int64_t row, int64_t col) const { return p[row * ld + col]; }
};
template <typename T>
struct RowsOut {
  T* p;
  int64_t ld;
  explicit RowsOut(const Tensor& t) : p(out<T>(t)), ld(t.row_stride()) {}
  T& operator()(int64_t row, int64_t col) const { return p[row * ld + col]; }
};

// The shape letters of a prepare call (mamba3.h), from its tensors.
struct PrepareDims {
  int64_t B, L, H, P, N, G, R, S;
  explicit PrepareDims(const ops::Mamba3PrepareArgs& a)
      : B(a.x.dim(0)),
        L(a.x.dim(1)),
        H(a.heads),
        P(a.x.cols() / a.heads),
        N(0),
        G(a.groups),
        R(a.rank),
        S(a.ang.cols()) {
    N = a.B.cols() / (R * G);
  }
};

// The entries (i0, i1) that rotary angle j turns (SPEC §4).
inline void rotary_pair(ops::RotaryPairs pairs, int64_t N, int64_t j, int64_t& i0, int64_t& i1) {
  i0 = pairs == ops::RotaryPairs::kAdjacent ? 2 * j : j;
  i1 = pairs == ops::RotaryPairs::kAdjacent ? 2 * j + 1 : j + N / 2;
}

// f(v) = 1 + v (v >= 0), 1 / (1 - v) (v < 0): the "heavy tail" of A.
inline double heavy_tail(double v) { return v >= 0 ? 1 + v : 1 / (1 - v); }
inline double heavy_tail_grad(double v) { return v >= 0 ? 1 : 1 / ((1 - v) * (1 - v)); }

// 1 / sqrt(mean(x^2) + eps) over n entries.
template <typename T>
double inv_rms(const T* x, int64_t n, double eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return 1 / std::sqrt(s / static_cast<double>(n) + eps);
}

}  // namespace m3
}  // namespace ssm::ref
