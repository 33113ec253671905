// Random F32 tensors for the kernel benchmarks: values uniform in
// [-scale, scale), the same for the same seed.
#pragma once

#include <cstdint>
#include <random>

#include "ssm/tensor/tensor.h"

namespace ssm::bench {

inline Tensor random_f32(const Shape& shape, uint32_t seed, float scale = 0.02f) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

}  // namespace ssm::bench
