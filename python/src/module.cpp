// The extension module ssm._ssm; python/ssm/__init__.py re-exports it.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "ssm/core/error.h"

PYBIND11_MODULE(_ssm, m) {
  m.doc() = "ssm: state-space language models (Mamba-2, Mamba-3, hybrids) on the ssm engine";
  // Every error the engine reports (files, configs, bad input) raises
  // ssm.Error with the engine's message.
  pybind11::register_exception<ssm::Error>(m, "Error", PyExc_RuntimeError);
  auto model = ssm::python::bind_model(m);
  ssm::python::bind_state(m);
  ssm::python::bind_generate(m, model);
  ssm::python::bind_trainer(m);
  ssm::python::bind_tokenizer(m);
}
