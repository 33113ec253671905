// Element types the engine stores, reads or computes in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ssm {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  // 8-bit weights: int8 values with one F32 scale per row (the last
  // dimension is a row), value = scale[row] * q. The scales travel with the
  // tensor (Tensor::scales()).
  kQ8,
  kF64,
  kI32,
  kI64,
};

// Bytes per element (kQ8: the int8 value; its scales are apart).
size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "F16", "BF16", "I32", "I64", "F64"; kQ8 is "Q8".
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType dtype);  // F32, F16, BF16, F64 (not Q8)

}  // namespace ssm
