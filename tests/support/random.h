// Deterministic random data for tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm::testing {

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor random_tensor(Shape shape, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  const std::vector<float> v = random_vector(t.numel(), seed, lo, hi);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

}  // namespace ssm::testing
