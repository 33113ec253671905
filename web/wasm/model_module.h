// The engine as a WebAssembly module (embind): one model, loaded from a
// directory of emscripten's in-memory file system that web/src/ssm.mjs
// fills, with one generation session. Every method catches the engine's
// errors and returns {error: message}, since exceptions reach JavaScript as
// bare pointers; web/src/ssm_engine.mjs turns that into a rejected promise.
// Requests and results are JSON documents, the names those of the JavaScript
// API (web/src/ssm.d.ts); what they do is what `ssm generate`, `ssm score`
// and `ssm train --wsla` do, from the same engine code.
//
// The methods live by what they do: model_module.cpp (loading, requests,
// scoring), generation.cpp, state_files.cpp, wsla_adapt.cpp,
// webgpu_handover.cpp (a generation whose forward runs outside the module);
// bindings.cpp names them for JavaScript.
#pragma once

#include <emscripten/val.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/text_out.h"
#include "model/stop_matcher.h"
#include "ssm/io/json.h"
#include "ssm/model/generator.h"
#include "ssm/model/language_model.h"
#include "ssm/ops/context.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {
struct AttentionState;
}

namespace ssm::web {

using emscripten::val;

val error_value(const std::string& message);
// {json: j as text}: what web/src/ssm_engine.mjs parses.
val json_value(const Json& j);

// An option of a request: its value, or fallback when absent or null; an
// error naming the option when it has the wrong type.
template <typename T>
T field(const Json& j, const char* name, T fallback) {
  if (!j.contains(name) || j[name].is_null()) return fallback;
  try {
    return j[name].get<T>();
  } catch (const std::exception&) {
    throw Error(cat("generate: option '", name, "' has the wrong type: ", j[name].dump()));
  }
}

class Model {
 public:
  // model_module.cpp
  val load(const std::string& dir, int threads);
  val reset();
  val score(const std::string& request);
  val tokenize(const std::string& text);
  val info_value();
  // generation.cpp
  val generate(const std::string& request, val on_piece);
  // state_files.cpp
  val state();
  val restore(const std::string& bytes);
  val stateTensors();
  val setStateTensor(const std::string& name, const std::string& shape_json,
                     const std::string& bytes);
  // wsla_adapt.cpp
  val adapt(const std::string& request, val on_step);
  // webgpu_handover.cpp
  val externalBegin(const std::string& request);
  val externalLogits();
  val externalStep(double chosen);
  val externalEnd(const std::string& timings);
  void externalAbort();

 private:
  // A generation whose forward passes run outside the module (webgpu_handover.cpp).
  struct ExternalRun {
    GenerationConfig cfg;
    std::vector<int64_t> prompt, tokens, history;
    std::optional<Sampler> sampler;
    std::optional<StopMatcher> stops;
    std::optional<cli::TextOut> out;
    std::vector<float> logits;
    int64_t fed = 0, decoded = 0;
    bool done = false;
    FinishReason finish = FinishReason::kLength;
    size_t sent = 0;
    // The text completed since the last call.
    std::string new_text();
  };

  ExternalRun& running();
  std::string_view token_bytes(int64_t id) const;

  // The session's layer-state tensors by their state-file names.
  std::vector<std::pair<std::string, Tensor*>> session_tensors();
  // The attention state a tensor name belongs to, or null.
  AttentionState* attention_of(const std::string& name);

  // f() as a value for JavaScript, or {error: message} for what it throws.
  template <typename F>
  val guarded(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return error_value(e.what());
    } catch (...) {
      return error_value("unknown error");
    }
  }

  // A generate request (JSON) as the CLI reads its options: the config and
  // the prompt's ids. Errors name the option.
  std::vector<int64_t> parse_request(const std::string& request, GenerationConfig& cfg) const;
  void check_loaded() const;
  const Tokenizer& tokenizer() const;
  // As `ssm generate`: generation_config.json's eos, else config.json's,
  // else the tokenizer's <|endoftext|>.
  std::vector<int64_t> default_stop_ids() const;
  // Held-out next-token loss of ids in windows of seq_len (`ssm score --all`).
  Json eval_json(const std::vector<int32_t>& ids, int64_t seq_len);
  Json info() const;

  std::string dir_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Tokenizer> tok_;  // null when the model has none: tok_error_ says why
  std::string tok_error_;
  std::string fingerprint_;
  SessionState session_;
  std::vector<int64_t> stop_ids_;
  std::unique_ptr<ExternalRun> run_;  // a generation driven from JavaScript
};

}  // namespace ssm::web
