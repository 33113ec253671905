// Tensor: a strided view of bytes on one device, sharing ownership of them.
// Views (row ranges, column blocks, reshapes) share the bytes; nothing is
// copied unless asked, and moving between devices is always explicit (to()).
//
// Layout words used across the engine: a tensor is *dense* when its strides
// are row-major with no gaps; it has *rows* when its last dimension is
// contiguous and every dimension before it folds into one run of rows with
// a single row stride (row_stride()), as a column block of a dense matrix
// does. Kernels take tensors with rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ssm/core/error.h"
#include "ssm/tensor/device.h"
#include "ssm/tensor/dtype.h"
#include "ssm/tensor/shape.h"

namespace ssm {

class Tensor {
 public:
  Tensor() = default;  // undefined: no shape, no bytes (an absent optional input)

  // Dense and uninitialised, from the device's allocator. kQ8 tensors get
  // their per-row scales too.
  static Tensor empty(DType dtype, const Shape& shape, Device device = Device::host());
  static Tensor zeros(DType dtype, const Shape& shape, Device device = Device::host());
  // Dense over bytes kept alive by owner (an mmap, an arena block).
  static Tensor borrow(std::shared_ptr<void> owner, void* data, DType dtype, const Shape& shape,
                       Device device = Device::host());

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t stride(int i) const { return strides_.at(i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  // Bytes of the elements (a dense tensor's storage; kQ8 scales not counted).
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  bool is_dense() const;
  // Rows: see the comment at the top. rows() is the product of every
  // dimension but the last (1 for a vector), cols() the last.
  bool has_rows() const;
  int64_t rows() const;
  int64_t cols() const { return shape_.empty() ? 1 : shape_.back(); }
  // Elements from one row to the next; SSM_CHECK that the tensor has rows.
  int64_t row_stride() const;

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // Typed pointer to the first element, on the tensor's device.
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;

  // kQ8: the F32 scales, one per row (shape: all dimensions but the last).
  const Tensor& scales() const;

  // Same bytes, new shape of equal element count. A dense tensor takes any
  // shape; one with rows takes a shape with the same last dimension.
  Tensor reshape(const Shape& shape) const;
  // Entries [begin, end) of dimension dim, sharing bytes.
  Tensor slice(int dim, int64_t begin, int64_t end) const;
  Tensor rows(int64_t begin, int64_t end) const { return slice(0, begin, end); }
  Tensor cols(int64_t begin, int64_t end) const { return slice(ndim() - 1, begin, end); }
  // Entry i of dimension 0, with that dimension dropped.
  Tensor index(int64_t i) const;

  // A dense copy on the same device.
  Tensor clone() const;
  // A dense copy on another device (the same device: a clone).
  Tensor to(Device device) const;
  // A dense host F32 copy of any floating, Q8 or integer tensor (F16, BF16
  // and Q8 widened exactly).
  Tensor to_f32() const;
  // A dense host copy in another dtype: floats round to nearest even,
  // Q8 quantises each row symmetrically (scale = max|row| / 127).
  Tensor to_dtype(DType dtype) const;

  bool same_layout(const Tensor& other) const {
    return dtype_ == other.dtype_ && shape_ == other.shape_;
  }

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  std::shared_ptr<Tensor> scales_;  // kQ8 only
  Shape shape_, strides_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  Device device_;
  bool defined_ = false;
};

// Row-major strides of a shape.
Shape dense_strides(const Shape& shape);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kQ8;
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
