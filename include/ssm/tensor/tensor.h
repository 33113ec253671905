// Tensor: a dense, row-major array that shares ownership of its bytes. Views
// (reshape, row ranges) share the same bytes; nothing copies unless asked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/tensor/dtype.h"

namespace ssm {

using Shape = std::vector<int64_t>;

// Element count of a shape; throws ssm::Error on negative dims or overflow.
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(DType dtype, Shape shape);  // uninitialised
  static Tensor zeros(DType dtype, Shape shape);
  // Wraps bytes kept alive by owner (an mmap, another buffer).
  static Tensor borrow(std::shared_ptr<void> owner, void* data, DType dtype, Shape shape);

  bool defined() const { return data_ != nullptr || numel_ == 0; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;

  // Same bytes, new shape of equal element count.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension, sharing bytes.
  Tensor rows(int64_t begin, int64_t end) const;
  // A deep copy that owns its bytes.
  Tensor clone() const;
  // F32 copy of any floating or integer tensor (F16/BF16 widened exactly).
  Tensor to_f32() const;
  // Same dtype and shape.
  bool same_layout(const Tensor& other) const {
    return dtype_ == other.dtype_ && shape_ == other.shape_;
  }

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
};

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};

template <typename T>
T* Tensor::data() {
  SSM_CHECK(dtype_ == DTypeOf<T>::value, "tensor holds ", dtype_name(dtype_));
  return static_cast<T*>(data_);
}
template <typename T>
const T* Tensor::data() const {
  SSM_CHECK(dtype_ == DTypeOf<T>::value, "tensor holds ", dtype_name(dtype_));
  return static_cast<const T*>(data_);
}

}  // namespace ssm
