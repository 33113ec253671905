// Inputs shared by the attention op tests.
#pragma once

#include <cmath>
#include <cstdint>

#include "ssm/tensor/tensor.h"

namespace ssm::testing {

// Standard RoPE over rot channels: base^(-2i/rot) for i < rot/2, base 10000
// (SPEC §5); undefined for rot = 0 (no rotary).
inline Tensor rope_inv_freq(int64_t rot, DType dtype = DType::kF32) {
  if (rot == 0) return {};
  Tensor t = Tensor::empty(DType::kF32, {rot / 2});
  for (int64_t i = 0; i < rot / 2; ++i)
    t.data<float>()[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rot));
  return dtype == DType::kF32 ? t : t.to_dtype(dtype);
}

}  // namespace ssm::testing
