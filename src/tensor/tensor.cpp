#include "ssm/tensor/tensor.h"

#include "ssm/tensor/convert.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace ssm {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(cat("negative dimension in shape ", shape_str(shape)));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error(cat("shape ", shape_str(shape), " has too many elements"));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // 64-byte alignment suits every SIMD width the kernels use.
  const size_t bytes = (std::max<size_t>(t.nbytes(), 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw Error(cat("out of memory allocating ", bytes, " bytes"));
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(std::shared_ptr<void> owner, void* data, DType dtype, Shape shape) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  SSM_CHECK(shape_numel(shape) == numel_, "reshape ", shape_str(shape_), " -> ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  SSM_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "rows ", begin, ":",
            end, " of ", shape_str(shape_));
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  t.shape_[0] = end - begin;
  t.numel_ = row * (end - begin);
  t.data_ = static_cast<char*>(data_) + begin * row * dtype_size(dtype_);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(dtype_, shape_);
  if (numel_) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::to_f32() const {
  if (dtype_ == DType::kF32) return clone();
  Tensor t = empty(DType::kF32, shape_);
  float* out = static_cast<float*>(t.data_);
  const char* in = static_cast<const char*>(data_);
  switch (dtype_) {
    case DType::kF16: f16_to_f32(in, out, numel_); break;
    case DType::kBF16: bf16_to_f32(in, out, numel_); break;
    case DType::kI32:
      for (int64_t i = 0; i < numel_; ++i) {
        int32_t v;
        std::memcpy(&v, in + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      break;
    case DType::kI64:
      for (int64_t i = 0; i < numel_; ++i) {
        int64_t v;
        std::memcpy(&v, in + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case DType::kF32: break;
  }
  return t;
}

}  // namespace ssm
