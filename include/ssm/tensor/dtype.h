// Element types the engine stores or reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ssm {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64 };

size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "F16", "BF16", "I32", "I64".
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace ssm
