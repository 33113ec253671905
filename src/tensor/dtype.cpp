#include "ssm/tensor/dtype.h"

#include "ssm/core/error.h"

namespace ssm {

namespace {
constexpr DType kAll[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8,
                          DType::kF64, DType::kI32, DType::kI64};
}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8: return 1;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  SSM_CHECK(false, "unknown dtype");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ8: return "Q8";
    case DType::kF64: return "F64";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : kAll)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF64;
}

}  // namespace ssm
