#include "ops/op_check.h"

namespace ssm::ops::detail {

void OpCheck::fail(const std::string& message) const {
  throw Error(cat("op '", op_, "': ", message));
}

void OpCheck::unsupported() const {
  throw Error(cat("op '", op_, "' is not implemented by backend '", ctx_.backend().name(), "'"));
}

void OpCheck::on_device(const char* name, const Tensor& t) const {
  if (!t.defined()) fail(cat(name, " is missing"));
  if (t.device() != ctx_.device())
    fail(cat(name, " is on ", device_str(t.device()), ", backend '", ctx_.backend().name(),
             "' computes on ", device_str(ctx_.device())));
}

const OpCheck& OpCheck::rows(const char* name, const Tensor& t, DType dtype) const {
  on_device(name, t);
  if (t.dtype() != dtype) fail(cat(name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype)));
  if (!t.has_rows()) fail(cat(name, " of shape ", t.shape(), " and strides ", t.strides(), " has no rows"));
  return *this;
}

const OpCheck& OpCheck::rows(const char* name, const Tensor& t, int64_t n, int64_t c,
                             DType dtype) const {
  rows(name, t, dtype);
  if ((n >= 0 && t.rows() != n) || (c >= 0 && t.cols() != c))
    fail(cat(name, " has shape ", t.shape(), ", expected ", n, " rows of ", c));
  return *this;
}

const OpCheck& OpCheck::dense(const char* name, const Tensor& t, const Shape& shape,
                              DType dtype) const {
  on_device(name, t);
  if (t.dtype() != dtype) fail(cat(name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype)));
  if (t.shape() != shape) fail(cat(name, " has shape ", t.shape(), ", expected ", shape));
  if (!t.is_dense()) fail(cat(name, " must be dense, has strides ", t.strides()));
  return *this;
}

const OpCheck& OpCheck::optional(const char* name, const Tensor& t, const Shape& shape,
                                 DType dtype) const {
  return t.defined() ? dense(name, t, shape, dtype) : *this;
}

const OpCheck& OpCheck::state(const char* name, const Tensor& t, const Shape& shape) const {
  if (!t.defined() || t.dtype() != DType::kBF16) return optional(name, t, shape);
  if (!ctx_.device().is_host() && !ctx_.backend().ops().bf16_state_scans)
    fail(cat(ctx_.backend().name(), ": a BF16 state is not supported yet (--state-dtype f32)"));
  return dense(name, t, shape, DType::kBF16);
}

const OpCheck& OpCheck::optional_rows(const char* name, const Tensor& t, int64_t n, int64_t c) const {
  return t.defined() ? rows(name, t, n, c) : *this;
}

const OpCheck& OpCheck::host(const char* name, const Tensor& t, const Shape& shape,
                             DType dtype) const {
  if (!t.defined()) fail(cat(name, " is missing"));
  if (!t.device().is_host()) fail(cat(name, " must be on the host"));
  if (t.dtype() != dtype) fail(cat(name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype)));
  if (t.shape() != shape || !t.is_dense()) fail(cat(name, " has shape ", t.shape(), ", expected ", shape));
  return *this;
}

const OpCheck& OpCheck::expect(bool ok, const char* what) const {
  if (!ok) fail(what);
  return *this;
}

}  // namespace ssm::ops::detail
