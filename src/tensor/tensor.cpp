#include "ssm/tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ssm/tensor/convert.h"

namespace ssm {
namespace {

Shape leading(const Shape& shape) {
  Shape s = shape;
  if (!s.empty()) s.pop_back();
  return s;
}

// Copies the elements of a tensor with rows into dense rows at dst, on the
// tensor's own device.
void copy_rows_dense(const Tensor& src, void* dst) {
  const DeviceMemory& mem = device_memory(src.device());
  const size_t esize = dtype_size(src.dtype());
  const size_t row_bytes = static_cast<size_t>(src.cols()) * esize;
  const int64_t rows = src.rows(), ld = src.row_stride();
  if (ld == src.cols()) {
    mem.copy_on_device(src.device(), dst, src.raw(), static_cast<size_t>(rows) * row_bytes);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    mem.copy_on_device(src.device(), static_cast<char*>(dst) + r * row_bytes,
                       static_cast<const char*>(src.raw()) + r * ld * esize, row_bytes);
}

// Host only: any strides, element by element over the last dimension.
void copy_strided_host(const Tensor& src, char* dst) {
  const size_t esize = dtype_size(src.dtype());
  const int n = src.ndim();
  if (n == 0) {
    std::memcpy(dst, src.raw(), esize);
    return;
  }
  Shape idx;
  idx.resize(static_cast<size_t>(n), 0);
  const int64_t total = src.numel();
  for (int64_t k = 0; k < total; ++k) {
    int64_t off = 0;
    for (int d = 0; d < n; ++d) off += idx[d] * src.stride(d);
    std::memcpy(dst + k * esize, static_cast<const char*>(src.raw()) + off * esize, esize);
    for (int d = n - 1; d >= 0; --d) {
      if (++idx[d] < src.dim(d)) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

Shape dense_strides(const Shape& shape) {
  Shape s;
  s.resize(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(shape[i], 1);
  return s;
}

Tensor Tensor::empty(DType dtype, const Shape& shape, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = dense_strides(shape);
  t.device_ = device;
  t.defined_ = true;
  const DeviceMemory& mem = device_memory(device);
  const size_t bytes = t.nbytes();
  void* p = mem.allocate(device, bytes);
  if (!p)
    throw Error(cat("out of memory allocating ", bytes, " bytes on ", device_str(device)));
  auto free_fn = mem.free;
  t.owner_ = std::shared_ptr<void>(p, [free_fn, device](void* q) { free_fn(device, q); });
  t.data_ = p;
  if (dtype == DType::kQ8) t.scales_ = std::make_shared<Tensor>(empty(DType::kF32, leading(shape), device));
  return t;
}

Tensor Tensor::zeros(DType dtype, const Shape& shape, Device device) {
  Tensor t = empty(dtype, shape, device);
  const DeviceMemory& mem = device_memory(device);
  mem.fill_zero(device, t.data_, t.nbytes());
  if (t.scales_) mem.fill_zero(device, t.scales_->data_, t.scales_->nbytes());
  return t;
}

Tensor Tensor::borrow(std::shared_ptr<void> owner, void* data, DType dtype, const Shape& shape,
                      Device device) {
  SSM_CHECK(dtype != DType::kQ8, "a Q8 tensor needs its scales: use empty()");
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = dense_strides(shape);
  t.device_ = device;
  t.defined_ = true;
  return t;
}

bool Tensor::is_dense() const {
  if (numel_ == 0) return true;  // no elements, no gaps (a Mamba-3 phase with no rotary angles)
  int64_t expected = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= std::max<int64_t>(shape_[d], 1);  // as dense_strides counts an empty dimension
  }
  return true;
}

bool Tensor::has_rows() const {
  const size_t n = shape_.size();
  if (n == 0) return true;
  if (shape_[n - 1] > 1 && strides_[n - 1] != 1) return false;
  // Leading dimensions of size 1 carry no stride; the others must nest.
  int64_t inner = -1, inner_extent = 1;
  for (size_t d = n - 1; d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (inner >= 0 && strides_[d] != strides_[static_cast<size_t>(inner)] * inner_extent) return false;
    inner = static_cast<int64_t>(d);
    inner_extent = shape_[d];
  }
  return true;
}

int64_t Tensor::rows() const {
  int64_t r = 1;
  for (size_t d = 0; d + 1 < shape_.size(); ++d) r *= shape_[d];
  return r;
}

int64_t Tensor::row_stride() const {
  SSM_CHECK(has_rows(), "tensor of shape ", shape_, " and strides ", strides_, " has no rows");
  for (size_t d = shape_.size() - (shape_.empty() ? 0 : 1); d-- > 0;)
    if (shape_[d] != 1) return strides_[d];
  return cols();
}

const Tensor& Tensor::scales() const {
  SSM_CHECK(dtype_ == DType::kQ8 && scales_, "only Q8 tensors have scales");
  return *scales_;
}

Tensor Tensor::reshape(const Shape& shape) const {
  SSM_CHECK(shape_numel(shape) == numel_, "reshape ", shape_, " -> ", shape);
  Tensor t = *this;
  t.shape_ = shape;
  if (is_dense()) {
    t.strides_ = dense_strides(shape);
  } else {
    SSM_CHECK(has_rows() && !shape.empty() && shape.back() == cols(), "reshape of strided ",
              shape_, " (strides ", strides_, ") to ", shape, " would need a copy");
    t.strides_ = dense_strides(shape);
    const int64_t ld = row_stride();
    if (shape.size() >= 2) {
      t.strides_[shape.size() - 2] = ld;
      for (size_t d = shape.size() - 2; d-- > 0;) t.strides_[d] = t.strides_[d + 1] * shape[d + 1];
    }
  }
  if (scales_) t.scales_ = std::make_shared<Tensor>(scales_->reshape(leading(shape)));
  return t;
}

Tensor Tensor::slice(int dim, int64_t begin, int64_t end) const {
  const int n = ndim();
  const int d = dim < 0 ? dim + n : dim;
  SSM_CHECK(0 <= d && d < n && 0 <= begin && begin <= end && end <= shape_[d], "slice ", begin,
            ":", end, " of dimension ", dim, " of ", shape_);
  Tensor t = *this;
  t.shape_[d] = end - begin;
  t.numel_ = shape_numel(t.shape_);
  t.data_ = static_cast<char*>(data_) + begin * strides_[d] * static_cast<int64_t>(dtype_size(dtype_));
  if (scales_ && d < n - 1) t.scales_ = std::make_shared<Tensor>(scales_->slice(d, begin, end));
  return t;
}

Tensor Tensor::index(int64_t i) const {
  Tensor t = slice(0, i, i + 1);
  Shape s, st;
  for (int d = 1; d < ndim(); ++d) {
    s.push_back(t.shape_[d]);
    st.push_back(t.strides_[d]);
  }
  t.shape_ = s;
  t.strides_ = st;
  if (t.scales_) t.scales_ = std::make_shared<Tensor>(t.scales_->index(0));
  return t;
}

Tensor Tensor::clone() const {
  SSM_CHECK(defined_, "clone of an undefined tensor");
  Tensor t = empty(dtype_, shape_, device_);
  if (numel_) {
    if (has_rows()) copy_rows_dense(*this, t.data_);
    else {
      SSM_CHECK(device_.is_host(), "copy of a strided ", device_str(device_), " tensor");
      copy_strided_host(*this, static_cast<char*>(t.data_));
    }
  }
  if (scales_) *t.scales_ = scales_->clone();
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return clone();
  if (device.is_host() && numel_ > 0 && !is_dense() && has_rows() && !scales_) {
    // Rows apart on a device (a decode step's padded logits): their whole
    // span in one copy, then made dense here, not a device copy a row.
    const size_t esize = dtype_size(dtype_), row_bytes = static_cast<size_t>(cols()) * esize;
    const size_t ld = static_cast<size_t>(row_stride()) * esize;
    const size_t rows_n = static_cast<size_t>(rows());
    std::vector<char> span(rows_n == 0 ? 0 : (rows_n - 1) * ld + row_bytes);
    device_memory(device_).copy_to_host(device_, span.data(), data_, span.size());
    Tensor t = empty(dtype_, shape_, device);
    for (size_t r = 0; r < rows_n; ++r)
      std::memcpy(static_cast<char*>(t.data_) + r * row_bytes, span.data() + r * ld, row_bytes);
    return t;
  }
  const Tensor src = is_dense() ? *this : clone();
  Tensor t = empty(dtype_, shape_, device);
  if (device_.is_host()) {
    device_memory(device).copy_from_host(device, t.data_, src.data_, nbytes());
  } else if (device.is_host()) {
    device_memory(device_).copy_to_host(device_, t.data_, src.data_, nbytes());
  } else {
    return src.to(Device::host()).to(device);
  }
  if (scales_) *t.scales_ = scales_->to(device);
  return t;
}

Tensor Tensor::to_f32() const {
  if (!device_.is_host()) return to(Device::host()).to_f32();
  if (!is_dense()) return clone().to_f32();
  Tensor t = empty(DType::kF32, shape_);
  float* out = static_cast<float*>(t.data_);
  const char* in = static_cast<const char*>(data_);
  switch (dtype_) {
    case DType::kF32: std::memcpy(out, in, nbytes()); break;
    case DType::kF16: f16_to_f32(in, out, numel_); break;
    case DType::kBF16: bf16_to_f32(in, out, numel_); break;
    case DType::kQ8: {
      const int64_t C = cols(), R = numel_ / std::max<int64_t>(C, 1);
      const Tensor sc = scales_->is_dense() ? *scales_ : scales_->clone();
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
          out[r * C + c] = sc.data<float>()[r] * static_cast<float>(static_cast<const int8_t*>(data_)[r * C + c]);
      break;
    }
    case DType::kF64:
      for (int64_t i = 0; i < numel_; ++i) {
        double v;
        std::memcpy(&v, in + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
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
  }
  return t;
}

Tensor Tensor::to_dtype(DType dtype) const {
  if (dtype == dtype_) return to(Device::host());
  // Dense aligned F32 on the host is read in place: no F32 copy of a large
  // weight while it is converted.
  const bool in_place = dtype_ == DType::kF32 && device_.is_host() && is_dense() &&
                        reinterpret_cast<uintptr_t>(data_) % alignof(float) == 0;
  const Tensor f = in_place ? *this : to_f32();
  if (dtype == DType::kF32) return f;
  Tensor t = empty(dtype, shape_);
  const float* in = f.data<float>();
  switch (dtype) {
    case DType::kF16: f32_to_f16(in, t.data_, numel_); break;
    case DType::kBF16: f32_to_bf16(in, t.data_, numel_); break;
    case DType::kF64:
      for (int64_t i = 0; i < numel_; ++i) t.data<double>()[i] = in[i];
      break;
    case DType::kQ8: {
      const int64_t C = cols(), R = numel_ / std::max<int64_t>(C, 1);
      for (int64_t r = 0; r < R; ++r) {
        float amax = 0.f;
        for (int64_t c = 0; c < C; ++c) amax = std::max(amax, std::fabs(in[r * C + c]));
        const float scale = amax / 127.f, inv = amax > 0 ? 127.f / amax : 0.f;
        t.scales_->data<float>()[r] = scale;
        for (int64_t c = 0; c < C; ++c)
          t.data<int8_t>()[r * C + c] = static_cast<int8_t>(std::lrintf(in[r * C + c] * inv));
      }
      break;
    }
    default:
      throw Error(cat("cannot convert a ", dtype_name(dtype_), " tensor to ", dtype_name(dtype)));
  }
  return t;
}

}  // namespace ssm
