// ssm.Tokenizer: text <-> token ids with the engine's tokenizer.
#include <pybind11/stl.h>

#include "bindings.h"
#include "py_model.h"

namespace ssm::python {
namespace {

namespace py = pybind11;

py::str decode(const Tokenizer& tok, const py::handle& ids_obj, bool skip_special) {
  std::vector<int32_t> ids;
  for (const py::handle v : py::module_::import("numpy").attr("asarray")(ids_obj).attr("ravel")().attr("tolist")()) {
    if (!py::isinstance<py::int_>(v)) throw Error("Tokenizer.decode: ids must be integers");
    const int64_t id = v.cast<int64_t>();
    if (id < 0 || id > INT32_MAX) throw Error(cat("Tokenizer.decode: id ", id, " is negative or too large"));
    ids.push_back(static_cast<int32_t>(id));
  }
  const std::string bytes = tok.decode(ids, skip_special);
  // Tokens are bytes: a cut inside a character decodes to U+FFFD, never an error.
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

}  // namespace

void bind_tokenizer(py::module_& m) {
  py::class_<Tokenizer, std::shared_ptr<Tokenizer>>(m, "Tokenizer", "Byte-level BPE (tokenizer.json) or raw bytes.")
      .def_static("load", [](const std::string& path) { return std::shared_ptr<Tokenizer>(load_tokenizer_for_model(path)); },
                  py::arg("path"), "A model directory's tokenizer, or a tokenizer.json file.")
      .def("encode", [](const Tokenizer& t, const std::string& text) {
             std::vector<int32_t> ids;
             {
               py::gil_scoped_release release;
               ids = t.encode(text);
             }
             return std::vector<int64_t>(ids.begin(), ids.end());
           },
           py::arg("text"), "Token ids of text.")
      .def("decode", &decode, py::arg("ids"), py::arg("skip_special") = false, "Text of token ids.")
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"))
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size);
}

}  // namespace ssm::python
