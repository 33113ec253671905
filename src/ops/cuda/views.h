// Engine tensors as the launchers' plain views (launch.h).
#pragma once

#include "ops/cuda/launch.h"
#include "ops/tensor_data.h"

namespace ssm::cuda {

inline Rows rows_of(const Tensor& t) {
  return {ops::elements<float>(t), t.rows(), t.cols(), t.rows() > 1 ? t.row_stride() : t.cols()};
}
inline ConstRows const_rows_of(const Tensor& t) {
  return {t.data<float>(), t.rows(), t.cols(), t.rows() > 1 ? t.row_stride() : t.cols()};
}
inline float* ptr_or_null(const Tensor& t) { return ops::elements_or_null<float>(t); }
// A recurrent state, F32 or BF16 (the op front ends check which it may be).
inline StatePtr state_or_null(const Tensor& t) {
  if (!t.defined()) return {};
  return {const_cast<void*>(t.raw()), t.dtype() == DType::kBF16};
}

}  // namespace ssm::cuda
