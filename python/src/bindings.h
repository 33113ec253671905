// One function per part of the Python API, each adding its classes and
// functions to the module (module.cpp calls them in order).
#pragma once

#include <pybind11/pybind11.h>

#include "py_model.h"

namespace ssm::python {

using ModelClass = pybind11::class_<ModelHandle, ModelPtr>;

ModelClass bind_model(pybind11::module_& m);
void bind_state(pybind11::module_& m);
void bind_generate(pybind11::module_& m, ModelClass& model);
void bind_trainer(pybind11::module_& m);
void bind_tokenizer(pybind11::module_& m);

}  // namespace ssm::python
