// Centred finite differences in double, the oracle of every backward test:
// d f / d v[i] = (f(v + h e_i) - f(v - h e_i)) / 2h, with v perturbed in
// place (f reads it) and restored.
#pragma once

#include <cstdint>
#include <functional>

namespace ssm::testing {

inline void fd_gradient(double* v, int64_t n, const std::function<double()>& f, double* grad,
                        double h = 1e-6) {
  for (int64_t i = 0; i < n; ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f();
    v[i] = keep - h;
    const double down = f();
    v[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
}

}  // namespace ssm::testing
