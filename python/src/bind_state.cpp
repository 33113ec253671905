// ssm.State: a session's state as a Python object, saved and loaded as the
// same fingerprinted files `ssm generate --session` reads and writes.
#include <pybind11/stl.h>

#include "bindings.h"
#include "py_model.h"
#include "ssm/model/state_file.h"

namespace ssm::python {
namespace {

namespace py = pybind11;

void save(StateHandle& s, const std::string& path) {
  s.check_usable(*s.owner);
  py::gil_scoped_release release;
  std::lock_guard lock(s.owner->busy);
  save_state(path, s.owner->model, s.session, s.owner->ctx);
}

StatePtr load(const std::string& path, const ModelPtr& model) {
  model->check_free();
  py::gil_scoped_release release;
  std::lock_guard lock(model->busy);
  SessionState session = load_state(path, model->model, model->ctx);
  return std::make_shared<StateHandle>(model, std::move(session));
}

StatePtr copy(StateHandle& s) {
  s.check_usable(*s.owner);
  py::gil_scoped_release release;
  std::lock_guard lock(s.owner->busy);
  return std::make_shared<StateHandle>(s.owner, copy_session(*s.owner, s.session));
}

}  // namespace

void bind_state(py::module_& m) {
  py::class_<StateHandle, StatePtr>(m, "State",
                                    "The recurrent state of a batch of sequences after the tokens they consumed.")
      .def(py::init([](const ModelPtr& model, int64_t batch) {
             if (batch < 1) throw Error(cat("State: batch=", batch, ": must be at least 1"));
             return std::make_shared<StateHandle>(model, make_session(model->model, batch));
           }),
           py::arg("model"), py::arg("batch") = 1, "A fresh state of `batch` empty sequences.")
      .def("save", &save, py::arg("path"),
           "Write the state file (atomically), fingerprinted with the model, as `ssm generate --session` does.")
      .def_static("load", &load, py::arg("path"), py::arg("model"),
                  "Read a state file; ssm.Error when it is not one, is damaged, or was saved by another model.")
      .def("copy", &copy, "An independent deep copy: continuing one leaves the other as it was.")
      .def("__copy__", &copy)
      .def("__deepcopy__", [](StateHandle& s, const py::object&) { return copy(s); })
      .def_property_readonly("model", [](const StateHandle& s) { return s.owner; })
      .def_property_readonly("batch", [](const StateHandle& s) { return s.session.batch(); })
      .def_property_readonly("consumed", [](const StateHandle& s) { return s.session.consumed; },
                             "Tokens consumed into the state, per sequence.")
      .def_property_readonly("pending", [](const StateHandle& s) {
             py::list out;
             for (int64_t p : s.session.pending) out.append(p >= 0 ? py::object(py::int_(p)) : py::none());
             return out;
           },
           "Per sequence: the last generated token, not yet consumed (None when there is none).")
      .def("__repr__", [](const StateHandle& s) {
        return cat("<ssm.State: ", s.session.batch(), " sequence(s), ", s.session.consumed.at(0),
                   " tokens consumed by the first>");
      });
}

}  // namespace ssm::python
