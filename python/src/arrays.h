// NumPy arrays to and from engine tensors, sharing bytes where the layout
// allows: token ids are read in place when C-contiguous int32/int64, and
// results are handed out as arrays over the engine's own buffers.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "ssm/tensor/tensor.h"

namespace ssm::python {

namespace py = pybind11;

// Token ids as a (batch, length) tensor: an int32 or int64 array of rank 2
// (anything else array-like goes through numpy.asarray first). keep_alive
// receives the array the tensor reads from; it must outlive the tensor.
// ssm::Error naming `what` for another dtype, rank or an empty array.
Tensor ids_from_python(const py::handle& ids, const std::string& what, py::object& keep_alive);

// An array over tensor's bytes (F32, F64, I32 or I64, with rows or dense),
// keeping them alive; base, when given, becomes the array's base instead of
// a capsule holding the tensor (parameter views keep their Model alive).
py::array array_over(const Tensor& tensor, py::handle base = py::handle());

}  // namespace ssm::python
