// Model.generate and ssm.Stream: text in, text out (ids in, ids out), all at
// once or streamed piece by piece, continuing from and leaving a State.
#include <pybind11/stl.h>

#include <algorithm>
#include <random>

#include "arrays.h"
#include "bindings.h"
#include "generation.h"
#include "ssm/model/memory_budget.h"

namespace ssm::python {
namespace {

namespace py = pybind11;

// Waits for the next piece with the GIL released, waking to see Ctrl-C:
// KeyboardInterrupt stops the generation after its current token.
std::optional<Piece> wait_next(GenerationRun& run, bool& ended) {
  for (;;) {
    std::optional<Piece> piece;
    {
      py::gil_scoped_release release;
      piece = run.next(50, ended);
    }
    // Checked before handing out a piece too: a fast generation always has
    // one ready, and Ctrl-C must not wait for the whole run.
    if (!ended && PyErr_CheckSignals() != 0) {
      run.interrupt();
      {
        py::gil_scoped_release release;
        run.join();
      }
      throw py::error_already_set();
    }
    if (piece || ended) return piece;
  }
}

py::object to_python(const Piece& p) {
  if (const auto* s = std::get_if<std::string>(&p))
    return py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(s->data(), static_cast<Py_ssize_t>(s->size()), "replace"));
  return py::int_(std::get<int64_t>(p));
}

// The ids of a prompt: a str goes through the tokenizer, a sequence of ints
// is taken as ids.
std::vector<int64_t> prompt_ids(ModelHandle& m, const py::handle& prompt, bool& text_out) {
  text_out = py::isinstance<py::str>(prompt);
  std::vector<int64_t> ids;
  if (text_out) {
    const std::string text = prompt.cast<std::string>();
    for (const int32_t id : m.get_tokenizer()->encode(text)) ids.push_back(id);
    return ids;
  }
  py::array arr = py::module_::import("numpy").attr("asarray")(prompt);
  if (arr.size() == 0) return ids;  // continuing from a pending token
  if (arr.dtype().kind() != 'i' && arr.dtype().kind() != 'u')
    throw Error("generate: prompt must be a str or a sequence of int token ids");
  if (arr.ndim() != 1) throw Error(cat("generate: prompt ids must have rank 1, got rank ", arr.ndim()));
  const int64_t vocab = m.model.config().vocab_size;
  for (const py::handle v : arr.attr("tolist")()) {
    const int64_t id = v.cast<int64_t>();
    if (id < 0 || id >= vocab)
      throw Error(cat("generate: prompt id ", id, " is outside the model's vocabulary [0, ", vocab, ")"));
    ids.push_back(id);
  }
  return ids;
}

// Attention layers' caches grow with every token: refuse a max_tokens whose
// caches would not fit beside the weights, before anything is reserved.
void check_cache_memory(ModelHandle& m, const StateHandle& state, size_t prompt_tokens, int64_t max_tokens) {
  const uint64_t per_token = kv_cache_bytes_per_token(m.model.config());
  if (per_token == 0) return;
  const uint64_t limit = memory_limit(LoadOptions{m.max_memory}),
                 weights = model_memory_bytes(m.model, m.model.projection_dtype());
  const long double tokens = static_cast<long double>(state.session.consumed.at(0)) + prompt_tokens + max_tokens;
  if (tokens * per_token + weights > limit)
    throw Error(cat("generate: max_tokens=", max_tokens, ": the attention caches would need ",
                    format_bytes(static_cast<uint64_t>(std::min(tokens * per_token, 1.8e19L))),
                    " beyond the weights' ", format_bytes(weights), ", over the memory limit of ",
                    format_bytes(limit), " (max_memory)"));
}

struct GenerateArgs {
  int64_t max_tokens;
  float temperature, top_p, min_p, repetition_penalty;
  int64_t top_k, repeat_last_n;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_ids;
  bool ignore_eos;
  std::optional<uint64_t> seed;
};

GenerationConfig generation_config(ModelHandle& m, const GenerateArgs& a, bool text_out) {
  if (a.max_tokens < 0) throw Error(cat("generate: max_tokens=", a.max_tokens, ": must be at least 0"));
  if (a.repeat_last_n < 0 || a.repeat_last_n > kSessionHistory)
    throw Error(cat("generate: repeat_last_n=", a.repeat_last_n, ": must be in [0, ", kSessionHistory, "]"));
  // The ranges `ssm generate` accepts (the sampler alone would take a
  // negative temperature as greedy).
  if (!(a.temperature >= 0 && a.temperature <= 100))
    throw Error(cat("generate: temperature=", a.temperature, ": must be in [0, 100] (0 is greedy)"));
  if (a.top_k < 0) throw Error(cat("generate: top_k=", a.top_k, ": must be at least 0 (0 is off)"));
  GenerationConfig cfg;
  cfg.max_new_tokens = a.max_tokens;
  cfg.sampling = SamplingParams{.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                                .min_p = a.min_p, .repeat_penalty = a.repetition_penalty,
                                .repeat_last_n = a.repeat_last_n};
  cfg.sampling.validate();
  std::random_device device;
  cfg.seed = a.seed ? *a.seed : (static_cast<uint64_t>(device()) << 32) ^ device();
  for (const std::string& s : a.stop)
    if (s.empty()) throw Error("generate: a stop string is empty");
  cfg.stop_strings = a.stop;
  for (const int64_t id : a.stop_ids) {
    if (id < 0 || id >= m.model.config().vocab_size)
      throw Error(cat("generate: stop id ", id, " is outside the model's vocabulary [0, ",
                      m.model.config().vocab_size, ")"));
    cfg.stop_tokens.push_back(id);
  }
  if (!a.ignore_eos) {
    std::shared_ptr<Tokenizer> tok;
    if (text_out) tok = m.get_tokenizer();
    for (const int64_t id : default_stop_ids(m.model, tok.get())) cfg.stop_tokens.push_back(id);
  }
  return cfg;
}

py::object generate(const ModelPtr& m, const py::handle& prompt, const GenerateArgs& a, StatePtr state, bool stream) {
  GenerationRequest request;
  request.prompt = prompt_ids(*m, prompt, request.text_out);
  request.config = generation_config(*m, a, request.text_out);
  if (!state) state = std::make_shared<StateHandle>(m, make_session(m->model, 1));
  check_cache_memory(*m, *state, request.prompt.size(), a.max_tokens);
  auto run = std::make_shared<GenerationRun>(m, state, std::move(request), stream);
  if (stream) return py::make_tuple(py::cast(run), state);
  bool ended = false;
  while (!ended) wait_next(*run, ended);
  py::object out = py::isinstance<py::str>(prompt) ? to_python(Piece(run->text())) : py::cast(run->tokens());
  return py::make_tuple(out, state);
}

}  // namespace

void bind_generate(py::module_& m, ModelClass& model) {
  py::class_<GenerationRun, std::shared_ptr<GenerationRun>>(
      m, "Stream",
      "A running generation: iterate for the pieces of text (or the ids) as they are produced. "
      "Its State is in use until the iteration ends.")
      .def("__iter__", [](const std::shared_ptr<GenerationRun>& r) { return r; })
      .def("__next__", [](GenerationRun& r) {
        bool ended = false;
        std::optional<Piece> p = wait_next(r, ended);
        if (!p) throw py::stop_iteration();
        return to_python(*p);
      })
      .def("close", [](GenerationRun& r) {
             r.interrupt();
             py::gil_scoped_release release;
             r.join();
           },
           "Stop the generation after its current token; the state keeps what was reached.")
      .def_property_readonly("text", [](const GenerationRun& r) { return to_python(Piece(r.text())); },
                             "All the text, once the iteration has ended.")
      .def_property_readonly("tokens", &GenerationRun::tokens, "The new ids, once the iteration has ended.")
      .def_property_readonly("finish_reason", [](const GenerationRun& r) { return finish_reason_name(r.finish()); })
      .def_property_readonly("seed", &GenerationRun::seed)
      .def_property_readonly("state", &GenerationRun::state);

  model.def(
      "generate",
      [](const ModelPtr& self, const py::handle& prompt, int64_t max_tokens, float temperature, int64_t top_k,
         float top_p, float min_p, float repetition_penalty, int64_t repeat_last_n,
         std::optional<std::vector<std::string>> stop, std::optional<std::vector<int64_t>> stop_ids,
         bool ignore_eos, std::optional<uint64_t> seed, StatePtr state, bool stream) {
        const GenerateArgs a{max_tokens, temperature, top_p, min_p, repetition_penalty, top_k, repeat_last_n,
                             stop.value_or(std::vector<std::string>{}), stop_ids.value_or(std::vector<int64_t>{}),
                             ignore_eos, seed};
        return generate(self, prompt, a, std::move(state), stream);
      },
      py::arg("prompt"), py::kw_only(), py::arg("max_tokens") = 256, py::arg("temperature") = 0.8f,
      py::arg("top_k") = 40, py::arg("top_p") = 0.95f, py::arg("min_p") = 0.05f,
      py::arg("repetition_penalty") = 1.0f, py::arg("repeat_last_n") = 64, py::arg("stop") = py::none(),
      py::arg("stop_ids") = py::none(), py::arg("ignore_eos") = false, py::arg("seed") = py::none(),
      py::arg("state") = py::none(), py::arg("stream") = false,
      "Generate from prompt (a str, or a sequence of token ids: then ids come out). Returns (text, state), "
      "or (Stream, state) with stream=True. temperature 0 is greedy; stop strings are not part of the text.");
}

}  // namespace ssm::python
