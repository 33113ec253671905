// Typed element access for host kernels (ref and cpu). A Tensor is a view:
// const on the Tensor (kernels' argument structs are const) does not make its
// bytes const, so outputs are written through these.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ssm/tensor/tensor.h"

namespace ssm::ops {

// The first element, as T (the tensor's dtype, checked; T may be const).
template <typename T>
T* elements(const Tensor& t) {
  using E = std::remove_const_t<T>;
  return const_cast<E*>(t.data<E>());
}

// Null for an undefined (absent) tensor.
template <typename T>
T* elements_or_null(const Tensor& t) {
  return t.defined() ? elements<T>(t) : nullptr;
}

// Row r of a tensor with rows (tensor.h), its row stride looked up per call.
template <typename T>
T* row(const Tensor& t, int64_t r) {
  return elements<T>(t) + r * t.row_stride();
}

// A tensor with rows as (first element, row stride), read once per call.
template <typename T>
struct Rows {
  explicit Rows(const Tensor& t) : data(elements<T>(t)), ld(t.row_stride()) {}
  T* operator[](int64_t r) const { return data + r * ld; }
  T* data;
  int64_t ld;
};

}  // namespace ssm::ops
