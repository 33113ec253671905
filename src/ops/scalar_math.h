// Scalar functions every backend's kernels share, in their numerically
// stable forms, templated so that the reference kernels can run them in
// double. Derivatives sit beside the functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace ssm::ops {

template <typename T>
inline T sigmoid(T x) {
  return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
}
template <typename T>
inline T silu(T x) {
  return x / (T(1) + std::exp(-x));
}
// d/dx [x sigmoid(x)] = s (1 + x (1 - s)).
template <typename T>
inline T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}
// log(1 + e^x) without overflow for large x or loss for very negative x.
template <typename T>
inline T softplus(T x) {
  return x > T(20) ? x : (x < T(-20) ? std::exp(x) : std::log1p(std::exp(x)));
}
// d/dx log(1 + e^x) = sigmoid(x).
template <typename T>
inline T softplus_grad(T x) {
  return sigmoid(x);
}

// Rotates the pair (v[i0], v[i1]) by the angle whose cosine and sine are c, s:
// (a, b) -> (a c - b s, a s + b c).
template <typename T>
inline void rotate_pair(T* v, int64_t i0, int64_t i1, T c, T s) {
  const T a = v[i0], b = v[i1];
  v[i0] = a * c - b * s;
  v[i1] = a * s + b * c;
}
// The backward of rotate_pair at rotated values y: turns the gradient dy of
// the rotated pair into that of the unrotated one, in place, and returns the
// gradient of the angle, dy_b y_a - dy_a y_b.
template <typename T>
inline T rotate_pair_backward(const T* y, T* dy, int64_t i0, int64_t i1, T c, T s) {
  const T da = dy[i0], db = dy[i1];
  dy[i0] = da * c + db * s;
  dy[i1] = -da * s + db * c;
  return db * y[i0] - da * y[i1];
}

}  // namespace ssm::ops
