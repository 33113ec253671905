// Finite differences in float64 for the backward tests: centred differences
// of a scalar function of a double vector.
#pragma once

#include <functional>
#include <vector>

#include "support/finite_differences.h"
#include "support/random.h"

namespace ssm::testing {

// d f / d v[i] for every i by (f(v + h e_i) - f(v - h e_i)) / 2h.
inline std::vector<double> fd_gradient(std::vector<double>& v, const std::function<double()>& f,
                                       double h = 1e-6) {
  std::vector<double> g(v.size());
  fd_gradient(v.data(), static_cast<int64_t>(v.size()), f, g.data(), h);
  return g;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

inline std::vector<double> random_doubles(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  return to_double(random_vector(n, seed, lo, hi));
}

// max |a - b| / max |b|, the SPEC §7 measure, with b the float64 reference.
inline double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace ssm::testing
