// ssm.load and ssm.Model: loading, logits, forward with a state, parameters,
// config, tokenizer, scoring and saving.
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "arrays.h"
#include "bindings.h"
#include "py_model.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/ops/backend.h"
#include "ssm/train/data.h"
#include "ssm/train/evaluate.h"
#include "ssm/train/trainer.h"

namespace ssm::python {
namespace {

namespace fs = std::filesystem;

int pick_threads(std::optional<int> threads) {
  if (!threads) return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (*threads < 1 || *threads > 1024) throw Error(cat("threads=", *threads, ": must be in [1, 1024]"));
  return *threads;
}

// The weight dtypes of `ssm --dtype`, under their NumPy names too; None and
// "auto": the dtype the checkpoint stores them in (nullopt).
std::optional<DType> weight_dtype(const std::optional<std::string>& name) {
  if (!name || *name == "auto") return std::nullopt;
  static const std::pair<const char*, DType> names[] = {
      {"float32", DType::kF32}, {"f32", DType::kF32},  {"bfloat16", DType::kBF16},
      {"bf16", DType::kBF16},   {"float16", DType::kF16}, {"f16", DType::kF16},
      {"int8", DType::kQ8}};
  for (const auto& [n, d] : names)
    if (*name == n) return d;
  throw Error(cat("dtype=", *name,
                  ": the projection weights can be float32, bfloat16, float16 or int8 (or None: as stored)"));
}

// The NumPy-style name of a projection dtype, as dtype= takes it.
std::string weight_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    case DType::kQ8: return "int8";
    default: return "float32";
  }
}

ModelPtr load(const std::string& path, const std::string& backend, std::optional<std::string> dtype,
              std::optional<int> threads, std::optional<uint64_t> max_memory) {
  // dtype converts the projection matrices once loaded, as `ssm --dtype`
  // does (None: kept as stored, `--dtype auto`); norms, convolutions and
  // scan parameters stay float32.
  const std::optional<DType> weights = weight_dtype(dtype);
  const int n_threads = pick_threads(threads);
  py::gil_scoped_release release;
  LoadOptions options{.max_memory = max_memory.value_or(0), .weights = weights};
  LanguageModel model = LanguageModel::load(path, options);
  auto handle = std::make_shared<ModelHandle>(path, std::move(model), backend, n_threads);
  handle->max_memory = options.max_memory;
  return handle;
}

py::object json_to_python(const Json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

py::array logits(const ModelPtr& m, const py::handle& ids_obj) {
  py::object keep;
  m->check_free();
  const Tensor ids = ids_from_python(ids_obj, "Model.logits", keep);
  Tensor out;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(m->busy);
    out = m->model.forward(ids, nullptr, m->ctx);
  }
  return array_over(out);
}

// The pending token a generation left (sampled, not yet consumed) goes in
// first, as generate's own prefill does; its logits are not returned.
py::tuple forward(const ModelPtr& m, const py::handle& ids_obj, StatePtr state) {
  py::object keep;
  Tensor ids = ids_from_python(ids_obj, "Model.forward", keep);
  const int64_t B = ids.dim(0), L = ids.dim(1);
  if (!state) state = std::make_shared<StateHandle>(m, make_session(m->model, B));
  state->check_usable(*m);
  SessionState& s = state->session;
  if (s.batch() != B)
    throw Error(cat("Model.forward: the state holds ", s.batch(), " sequences but ids has ", B, " rows"));
  const auto has_pending = [](int64_t p) { return p >= 0; };
  const bool pending = std::any_of(s.pending.begin(), s.pending.end(), has_pending);
  if (pending && !std::all_of(s.pending.begin(), s.pending.end(), has_pending))
    throw Error("Model.forward: some sequences of the state have a pending token and some do not; "
                "continue them with generate");
  Tensor out;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(m->busy);
    Tensor fed = ids;
    if (pending) {
      fed = Tensor::empty(DType::kI64, {B, L + 1});
      for (int64_t b = 0; b < B; ++b) {
        fed.data<int64_t>()[b * (L + 1)] = s.pending[b];
        for (int64_t t = 0; t < L; ++t)
          fed.data<int64_t>()[b * (L + 1) + 1 + t] = ids.dtype() == DType::kI64
                                                         ? ids.data<int64_t>()[b * L + t]
                                                         : ids.data<int32_t>()[b * L + t];
      }
    }
    out = m->model.forward(fed, &s.model, m->ctx);
    if (pending) out = out.slice(1, 1, L + 1);
    for (int64_t b = 0; b < B; ++b) {
      auto& recent = s.recent[b];
      for (int64_t t = 0; t < fed.dim(1); ++t)
        recent.push_back(fed.dtype() == DType::kI64 ? fed.data<int64_t>()[b * fed.dim(1) + t]
                                                    : fed.data<int32_t>()[b * fed.dim(1) + t]);
      if (static_cast<int64_t>(recent.size()) > kSessionHistory)
        recent.erase(recent.begin(), recent.end() - kSessionHistory);
      s.consumed[b] += fed.dim(1);
      s.pending[b] = -1;
    }
  }
  return py::make_tuple(array_over(out), state);
}

py::dict parameters(const ModelPtr& m) {
  m->check_free();
  py::dict out;
  py::object base = py::cast(m);
  if (const DType d = m->model.projection_dtype(); d != DType::kF32)
    throw Error(cat("Model.parameters: the projections were loaded as ", weight_dtype_name(d),
                    "; ssm.load(path, dtype='float32') gives float32 arrays"));
  m->model.for_each_param([&](const std::string& name, Param& p) {
    out[py::str(name)] = array_over(p.value, base);
  });
  return out;
}

py::dict score(const ModelPtr& m, const std::string& text, int64_t seq_len, int64_t batch, int64_t max_tokens) {
  if (seq_len < 2) throw Error(cat("Model.score: seq_len=", seq_len, ": must be at least 2"));
  if (batch < 1) throw Error(cat("Model.score: batch=", batch, ": must be at least 1"));
  m->check_free();
  const auto tok = m->get_tokenizer();
  EvalResult r;
  {
    py::gil_scoped_release release;
    const std::vector<int32_t> ids = tok->encode(text);
    const int64_t length = std::min<int64_t>(seq_len, static_cast<int64_t>(ids.size()));
    if (length < 2) throw Error(cat("Model.score: the text is ", ids.size(), " tokens, too few to score"));
    if (max_tokens < length)
      throw Error(cat("Model.score: max_tokens=", max_tokens, " is less than one window of ", length, " tokens"));
    const auto windows = fixed_windows(ids, batch, length, max_tokens);
    std::lock_guard lock(m->busy);
    r = evaluate_batches(m->model, windows,
                         [&](int64_t id) { return static_cast<int64_t>(tok->token_bytes(static_cast<int32_t>(id)).size()); },
                         m->ctx);
  }
  py::dict d;
  d["tokens"] = r.tokens;
  d["bytes"] = r.bytes;
  d["loss"] = r.loss();
  d["perplexity"] = r.perplexity();
  d["bits_per_byte"] = r.bits_per_byte();
  return d;
}

// A model directory `ssm` and ssm.load read back: the weights as F32
// safetensors, config.json and tokenizer.json as the source had them.
void save(const ModelPtr& m, const std::string& path) {
  m->check_free();
  py::gil_scoped_release release;
  std::lock_guard lock(m->busy);
  const fs::path out(path);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(cat(path, ": cannot create directory: ", ec.message()));
  save_model_weights(m->model, out / "model.safetensors");
  for (const char* f : {"config.json", "tokenizer.json"}) {
    if (!fs::exists(m->dir / f) || fs::equivalent(m->dir, out, ec)) continue;
    const std::string bytes = read_file(m->dir / f);
    write_file_atomically(out / f, [&](FileWriter& w) { w.write(bytes); });
  }
}

}  // namespace

ModelClass bind_model(py::module_& m) {
  m.def("load", &load, py::arg("path"), py::arg("backend") = "cpu", py::arg("dtype") = py::none(),
        py::arg("threads") = py::none(), py::arg("max_memory") = py::none(),
        "Load a model directory (config.json and model.safetensors, sharded safetensors or "
        "pytorch_model.bin). backend: 'cpu' or 'ref'; dtype: the projections' dtype once loaded, "
        "'float32', 'bfloat16', 'float16' or 'int8' (default None: as the checkpoint stores them; "
        "float32 when stored in several dtypes); threads: worker threads (default: every core); "
        "max_memory: bytes the model may take (default: physical memory).");
  ModelClass model(m, "Model", "A loaded language model.");
  model
      .def_property_readonly("path", [](const ModelHandle& h) { return h.dir.string(); })
      .def_property_readonly("config", [](const ModelHandle& h) { return json_to_python(h.model.config().source); },
                             "config.json as a dict.")
      .def_property_readonly("vocab_size", [](const ModelHandle& h) { return h.model.config().vocab_size; })
      .def_property_readonly("backend", [](const ModelHandle& h) { return std::string(h.ctx.backend().name()); })
      .def_property_readonly("threads", [](const ModelHandle& h) { return h.ctx.threads(); })
      .def_property_readonly("dtype", [](ModelHandle& h) { return weight_dtype_name(h.model.projection_dtype()); },
                             "The projections' dtype as loaded: float32, bfloat16, float16 or int8.")
      .def_property_readonly("tokenizer", [](ModelHandle& h) { return h.get_tokenizer(); },
                             "The model's Tokenizer (its tokenizer.json, or raw bytes for a byte-level model).")
      .def("parameters", &parameters,
           "Every parameter by checkpoint name, as float32 arrays over the model's own memory (writes change the model).")
      .def("parameter_count", [](ModelHandle& h) { return h.model.parameter_count(); })
      .def("logits", &logits, py::arg("ids"),
           "Logits (batch, length, vocab) of a (batch, length) int32/int64 array of token ids.")
      .def("forward", &forward, py::arg("ids"), py::arg("state") = py::none(),
           "Logits of ids continuing from state (a fresh one when None); returns (logits, state), the state advanced.")
      .def("score", &score, py::arg("text"), py::arg("seq_len") = 256, py::arg("batch") = 8,
           py::arg("max_tokens") = int64_t{1} << 20,
           "Next-token loss of a whole text, in windows of seq_len tokens, as `ssm score --all` computes it: "
           "a dict of tokens, bytes, loss, perplexity, bits_per_byte.")
      .def("save", &save, py::arg("path"),
           "Write a model directory: model.safetensors (float32), config.json and tokenizer.json.")
      .def("__repr__", [](const ModelHandle& h) {
        return cat("<ssm.Model ", h.dir.string(), ": ", h.model.n_layer(), " layers, vocab ",
                   h.model.config().vocab_size, ", backend ", h.ctx.backend().name(), ">");
      });
  return model;
}

}  // namespace ssm::python
