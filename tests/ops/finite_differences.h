// Checks of ref's backward kernels in double precision: the ref kernels are
// templates that also run on F64 tensors (ops/ref/*.h), so a backward in
// double can be compared with central differences of the forward in double,
// where both are accurate to far below float rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>

#include "ssm/tensor/tensor.h"
#include "support/finite_differences.h"
#include "support/random.h"

namespace ssm::testing {

// A random dense F64 host tensor (float values widened: the same numbers
// the float tests use).
inline Tensor random_f64(const Shape& shape, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  return random_tensor(shape, seed, lo, hi).to_dtype(DType::kF64);
}
inline Tensor zeros_f64(const Shape& shape) { return Tensor::zeros(DType::kF64, shape); }

// sum(w * t) over every element; F64 of one shape (any strides with rows).
inline double weighted_sum(const Tensor& t, const Tensor& w) {
  const Tensor a = t.clone(), b = w.clone();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

// dJ/dt for every element of t (dense F64 host), by central differences of J,
// which must read t; t is perturbed in place and restored.
inline Tensor fd_gradient(Tensor& t, const std::function<double()>& J, double h = 1e-6) {
  Tensor g = zeros_f64(t.shape());
  fd_gradient(t.data<double>(), t.numel(), J, g.data<double>(), h);
  return g;
}

// max |got - want| / max |want| in double (want all zero: max |got|).
inline double rel_error_f64(const Tensor& got, const Tensor& want) {
  const Tensor a = got.clone(), b = want.clone();
  if (a.shape() != b.shape()) return INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(a.data<double>()[i] - b.data<double>()[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    scale = std::max(scale, std::abs(b.data<double>()[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Backward in double against finite differences in double: truncation and
// rounding of the differences stay near 1e-9, far below any real error.
constexpr double kFdTolerance = 1e-7;

}  // namespace ssm::testing
