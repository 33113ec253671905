#include "arrays.h"

#include <vector>

namespace ssm::python {

Tensor ids_from_python(const py::handle& ids, const std::string& what, py::object& keep_alive) {
  py::array arr = py::isinstance<py::array>(ids) ? py::reinterpret_borrow<py::array>(ids)
                                                  : py::module_::import("numpy").attr("asarray")(ids);
  const py::dtype dt = arr.dtype();
  const bool is_int = dt.kind() == 'i' && (dt.itemsize() == 4 || dt.itemsize() == 8);
  if (!is_int)
    throw Error(cat(what, ": token ids must be an int32 or int64 array, got dtype ",
                    py::str(py::handle(dt)).cast<std::string>()));
  if (arr.ndim() != 2)
    throw Error(cat(what, ": token ids must have rank 2 (batch, length), got rank ", arr.ndim()));
  if (arr.shape(0) == 0 || arr.shape(1) == 0)
    throw Error(cat(what, ": token ids are empty (shape (", arr.shape(0), ", ", arr.shape(1), "))"));
  // A strided view is copied once into C order; a C-contiguous array is read in place.
  if (dt.itemsize() == 8) keep_alive = py::array_t<int64_t, py::array::c_style>::ensure(arr);
  else keep_alive = py::array_t<int32_t, py::array::c_style>::ensure(arr);
  py::array dense = py::reinterpret_borrow<py::array>(keep_alive);
  const DType dtype = dt.itemsize() == 8 ? DType::kI64 : DType::kI32;
  void* data = const_cast<void*>(dense.data());
  return Tensor::borrow(std::shared_ptr<void>(data, [](void*) {}), data, dtype, {dense.shape(0), dense.shape(1)});
}

namespace {

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return py::dtype::of<float>();
    case DType::kF64: return py::dtype::of<double>();
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI64: return py::dtype::of<int64_t>();
    default: throw Error(cat("a ", dtype_name(dtype), " tensor has no NumPy dtype here"));
  }
}

}  // namespace

py::array array_over(const Tensor& tensor, py::handle base) {
  SSM_CHECK(tensor.device().is_host(), "only host tensors become arrays");
  std::vector<py::ssize_t> shape, strides;
  const auto item = static_cast<py::ssize_t>(dtype_size(tensor.dtype()));
  for (int i = 0; i < tensor.ndim(); ++i) {
    shape.push_back(tensor.dim(i));
    strides.push_back(tensor.stride(i) * item);
  }
  void* data = const_cast<void*>(tensor.raw());
  if (base) return py::array(numpy_dtype(tensor.dtype()), shape, strides, data, base);
  auto* held = new Tensor(tensor);
  py::capsule owner(held, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(numpy_dtype(tensor.dtype()), shape, strides, data, owner);
}

}  // namespace ssm::python
