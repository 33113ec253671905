// The engine as a WebAssembly module (embind): one model, loaded from a
// directory of emscripten's in-memory file system that web/src/ssm.mjs
// fills, with one generation session. Every method catches the engine's
// errors and returns {error: message}, since exceptions reach JavaScript as
// bare pointers; web/src/ssm_engine.mjs turns that into a rejected promise.
// Requests and results are JSON documents, the names those of the JavaScript
// API (web/src/ssm.d.ts); what they do is what `ssm generate`, `ssm score`
// and `ssm train --wsla` do, from the same engine code.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/text_out.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/model/generator.h"
#include "ssm/model/language_model.h"
#include "ssm/model/state_file.h"
#include "ssm/ops/context.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/train/data.h"
#include "ssm/train/evaluate.h"
#include "ssm/train/trainer.h"

namespace ssm::web {
namespace {

using emscripten::val;
namespace fs = std::filesystem;

// Where a state passes through the in-memory file system: the engine's own
// state-file writer and reader make and check the bytes.
constexpr const char* kStatePath = "/tmp/ssm-session.state";

val error_value(const std::string& message) {
  val v = val::object();
  v.set("error", message);
  return v;
}

val json_value(const Json& j) {
  val v = val::object();
  // A model may generate bytes that are not UTF-8 (a byte-level model's
  // text cut anywhere): they become U+FFFD in the text, the ids stay exact.
  v.set("json", j.dump(-1, ' ', false, Json::error_handler_t::replace));
  return v;
}

// An eos_token_id value (one id or a list); none when absent or null.
std::vector<int64_t> eos_ids(const Json& j) {
  std::vector<int64_t> ids;
  if (!j.is_object() || !j.contains("eos_token_id")) return ids;
  const Json& v = j["eos_token_id"];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array())
    for (const Json& e : v)
      if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
  return ids;
}

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
  // dir holds config.json, the weights and tokenizer.json (or a byte-level
  // config). threads: the context's pool (1 in the single-threaded build).
  val load(const std::string& dir, int threads) {
    return guarded([&] {
      dir_ = dir;
      ctx_ = std::make_unique<Context>("cpu", std::max(1, threads));
      model_ = std::make_unique<LanguageModel>(LanguageModel::load(dir));
      // As `ssm generate`: a model without a tokenizer still generates from
      // ids to ids; what needs text reports why it has none.
      try {
        tok_ = load_tokenizer_for_model(dir);
      } catch (const std::exception& e) {
        tok_.reset();
        tok_error_ = e.what();
      }
      fingerprint_ = model_fingerprint(*model_, *ctx_);
      session_ = make_session(*model_, 1);
      stop_ids_ = default_stop_ids();
      return json_value(info());
    });
  }

  // A fresh session: nothing consumed.
  val reset() {
    return guarded([&] {
      check_loaded();
      session_ = make_session(*model_, 1);
      return json_value(info());
    });
  }

  // request: {prompt | promptIds, maxTokens, temperature, topK, topP, minP,
  // repeatPenalty, repeatLastN, seed, stop, stopIds, ignoreEos, noSpecial}
  // with the CLI's defaults; on_piece(json) gets the text as it completes,
  // as a JSON string.
  // Continues the model's session.
  val generate(const std::string& request, val on_piece) {
    return guarded([&] {
      check_loaded();
      const Json r = parse_json(request, "generate request");
      GenerationConfig cfg;
      cfg.max_new_tokens = field<int64_t>(r, "maxTokens", 256);
      if (cfg.max_new_tokens < 0) throw Error("generate: maxTokens must be at least 0");
      cfg.sampling = SamplingParams{.temperature = field<float>(r, "temperature", 0.8f),
                                    .top_k = field<int64_t>(r, "topK", 40),
                                    .top_p = field<float>(r, "topP", 0.95f),
                                    .min_p = field<float>(r, "minP", 0.05f),
                                    .repeat_penalty = field<float>(r, "repeatPenalty", 1.f),
                                    .repeat_last_n = field<int64_t>(r, "repeatLastN", 64)};
      cfg.seed = field<uint64_t>(r, "seed", 0);
      cfg.stop_strings = field<std::vector<std::string>>(r, "stop", {});
      for (const int64_t id : field<std::vector<int64_t>>(r, "stopIds", {})) {
        if (id < 0 || id >= model_->config().vocab_size)
          throw Error(cat("generate: stop id ", id, " is outside the model's vocabulary [0, ",
                          model_->config().vocab_size, ")"));
        cfg.stop_tokens.push_back(id);
      }
      if (!field<bool>(r, "ignoreEos", false))
        cfg.stop_tokens.insert(cfg.stop_tokens.end(), stop_ids_.begin(), stop_ids_.end());

      std::vector<int64_t> prompt;
      if (r.contains("promptIds") && !r["promptIds"].is_null()) {
        for (const int64_t id : field<std::vector<int64_t>>(r, "promptIds", {})) {
          if (id < 0 || id >= model_->config().vocab_size)
            throw Error(cat("generate: prompt id ", id, " is outside the model's vocabulary [0, ",
                            model_->config().vocab_size, ")"));
          prompt.push_back(id);
        }
      } else {
        const std::string text = field<std::string>(r, "prompt", "");
        // As `ssm generate`: a fresh text gets the tokenizer's special
        // tokens; a prompt continuing the session is mid-text.
        const bool special = !field<bool>(r, "noSpecial", false) && session_.pending[0] < 0;
        const Tokenizer& tok = tokenizer();
        for (const int32_t id : special ? tok.encode_with_special(text) : tok.encode(text))
          prompt.push_back(id);
      }
      if (prompt.empty() && session_.pending[0] < 0) throw Error("generate: the prompt is empty");
      if (!cfg.stop_strings.empty()) tokenizer();  // stop strings are matched on text

      Generator gen(*model_, *ctx_);
      std::optional<cli::TextOut> out;  // none without a tokenizer: ids only
      if (tok_) {
        gen.set_token_text([&](int64_t id) {
          return id < tok_->vocab_size() ? tok_->token_bytes(static_cast<int32_t>(id))
                                         : std::string_view();
        });
        out.emplace(*tok_, cfg.stop_strings, nullptr);
      }
      size_t sent = 0;
      const auto send_text = [&] {
        // As a JSON string: bytes that are not UTF-8 become U+FFFD exactly
        // as in the result's text.
        if (!out) return;
        if (out->text().size() > sent)
          on_piece(
              Json(out->text().substr(sent)).dump(-1, ' ', false, Json::error_handler_t::replace));
        sent = out->text().size();
      };
      const SequenceOutput result = gen.generate(session_, {prompt}, cfg, [&](int64_t, int64_t id) {
        if (!out ||
            std::find(cfg.stop_tokens.begin(), cfg.stop_tokens.end(), id) != cfg.stop_tokens.end())
          return;
        out->push(id);
        send_text();
      })[0];
      if (out) out->finish(result.finish == FinishReason::kStopString);
      send_text();
      const GenerationStats& s = gen.stats();
      Json doc = {{"promptIds", prompt},
                  {"ids", result.tokens},
                  {"text", out ? out->text() : std::string()},
                  {"finish", finish_reason_name(result.finish)},
                  {"seed", cfg.seed},
                  {"stats",
                   {{"prefillTokens", s.prefill_tokens},
                    {"prefillSeconds", s.prefill_seconds},
                    {"decodeTokens", s.decode_tokens},
                    {"decodeSeconds", s.decode_seconds}}},
                  {"consumed", session_.consumed[0]}};
      return json_value(doc);
    });
  }

  // The session as the bytes of a state file (what `ssm generate --session`
  // reads and writes).
  val state() {
    return guarded([&] {
      check_loaded();
      save_state(kStatePath, session_, fingerprint_);
      const std::string bytes = read_file(kStatePath);
      fs::remove(kStatePath);
      return val::global("Uint8Array")
          .new_(emscripten::typed_memory_view(bytes.size(),
                                              reinterpret_cast<const uint8_t*>(bytes.data())));
    });
  }

  // The session from a state file's bytes; an error (and the session as it
  // was) when they are not a state file of this model.
  val restore(const std::string& bytes) {
    return guarded([&] {
      check_loaded();
      write_file_atomically(kStatePath, [&](FileWriter& w) { w.write(bytes); });
      std::optional<SessionState> loaded;
      try {
        loaded = load_state(kStatePath, *model_, fingerprint_);
      } catch (...) {
        fs::remove(kStatePath);
        throw;
      }
      fs::remove(kStatePath);
      if (loaded->batch() != 1)
        throw Error(cat("restore: the state holds ", loaded->batch(), " sequences, not one"));
      session_ = std::move(*loaded);
      return json_value(info());
    });
  }

  // Held-out next-token loss of text, in windows of seqLen (as `ssm score --all`).
  val score(const std::string& request) {
    return guarded([&] {
      check_loaded();
      const Json r = parse_json(request, "score request");
      const std::vector<int32_t> ids = tokenizer().encode(field<std::string>(r, "text", ""));
      return json_value(eval_json(ids, field<int64_t>(r, "seqLen", 256)));
    });
  }

  // WSLA fast-adapt on text (`ssm train --wsla` in place): the last
  // `holdout` fraction is held out and scored before and after; onStep(json)
  // gets each step's report.
  val adapt(const std::string& request, val on_step) {
    return guarded([&] {
      check_loaded();
      const Json r = parse_json(request, "adapt request");
      TrainOptions opt;
      opt.wsla = field<bool>(r, "wsla", true);
      opt.steps = field<int64_t>(r, "steps", 20);
      opt.lr = field<double>(r, "lr", 1e-3);
      opt.batch = field<int64_t>(r, "batch", 4);
      opt.seq_len = field<int64_t>(r, "seqLen", 64);
      opt.warmup = field<int64_t>(r, "warmup", 0);
      opt.weight_decay = field<double>(r, "weightDecay", 0.0);
      opt.seed = field<uint64_t>(r, "seed", 0);
      if (opt.steps < 1) throw Error("adapt: steps must be at least 1");
      if (!(opt.lr > 0 && opt.lr <= 10)) throw Error("adapt: lr must be in (0, 10]");
      if (opt.seq_len < 2 || opt.batch < 1)
        throw Error("adapt: seqLen must be at least 2 and batch at least 1");
      const double holdout = field<double>(r, "holdout", 0.1);
      std::vector<int32_t> ids = tokenizer().encode(field<std::string>(r, "text", ""));
      const TokenSplit split =
          split_tokens(std::move(ids), holdout, opt.seq_len, "adapt: the text");
      const Json before = eval_json(split.held_out, opt.seq_len);
      Json steps = Json::array();
      {
        Trainer trainer(*model_, split.train, opt, *ctx_);
        while (!trainer.finished()) {
          const StepReport rep = trainer.step();
          const Json j = {
              {"step", rep.step}, {"loss", rep.loss}, {"lr", rep.lr}, {"gradNorm", rep.grad_norm}};
          steps.push_back(j);
          if (!on_step.isUndefined()) on_step(j.dump());
        }
      }
      // The weights changed: states of the old weights no longer continue it.
      fingerprint_ = model_fingerprint(*model_, *ctx_);
      return json_value({{"steps", steps},
                         {"heldOutBefore", before},
                         {"heldOutAfter", eval_json(split.held_out, opt.seq_len)}});
    });
  }

  val tokenize(const std::string& text) {
    return guarded([&] {
      check_loaded();
      return json_value(Json(tokenizer().encode(text)));
    });
  }

  val info_value() {
    return guarded([&] {
      check_loaded();
      return json_value(info());
    });
  }

 private:
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

  void check_loaded() const {
    if (!model_) throw Error("no model is loaded");
  }

  const Tokenizer& tokenizer() const {
    if (!tok_) throw Error(tok_error_);
    return *tok_;
  }

  // As `ssm generate`: generation_config.json's eos, else config.json's,
  // else the tokenizer's <|endoftext|>.
  std::vector<int64_t> default_stop_ids() const {
    const fs::path gen = fs::path(dir_) / "generation_config.json";
    if (fs::is_regular_file(gen)) {
      const std::vector<int64_t> ids = eos_ids(load_json_file(gen));
      if (!ids.empty()) return ids;
    }
    const std::vector<int64_t> ids = eos_ids(model_->config().source);
    if (!ids.empty()) return ids;
    if (tok_)
      if (const auto id = tok_->token_to_id("<|endoftext|>")) return {*id};
    return {};
  }

  Json eval_json(const std::vector<int32_t>& ids, int64_t seq_len) {
    const int64_t length = std::min<int64_t>(seq_len, static_cast<int64_t>(ids.size()));
    if (length < 2)
      throw Error(cat("score: the text is ", ids.size(), " tokens, too few to score"));
    const auto windows = fixed_windows(ids, 8, length, int64_t{1} << 40);
    const EvalResult e = evaluate_batches(
        *model_, windows,
        [&](int64_t id) {
          return static_cast<int64_t>(tokenizer().token_bytes(static_cast<int32_t>(id)).size());
        },
        *ctx_);
    return {{"tokens", e.tokens},
            {"loss", e.loss()},
            {"perplexity", e.perplexity()},
            {"bitsPerByte", e.bits_per_byte()}};
  }

  Json info() const {
    return {{"vocabSize", model_->config().vocab_size},
            {"layers", model_->n_layer()},
            {"fingerprint", fingerprint_},
            {"consumed", session_.consumed[0]},
            {"pending", session_.pending[0]},
            {"threads", ctx_->pool().size()}};
  }

  std::string dir_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Tokenizer> tok_;  // null when the model has none: tok_error_ says why
  std::string tok_error_;
  std::string fingerprint_;
  SessionState session_;
  std::vector<int64_t> stop_ids_;
};

}  // namespace
}  // namespace ssm::web

EMSCRIPTEN_BINDINGS(ssm) {
  using ssm::web::Model;
  emscripten::class_<Model>("Model")
      .constructor<>()
      .function("load", &Model::load)
      .function("reset", &Model::reset)
      .function("generate", &Model::generate)
      .function("state", &Model::state)
      .function("restore", &Model::restore)
      .function("score", &Model::score)
      .function("adapt", &Model::adapt)
      .function("tokenize", &Model::tokenize)
      .function("info", &Model::info_value);
}
