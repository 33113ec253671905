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
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/text_out.h"
#include "model/stop_matcher.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/layers/attention_layer.h"
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
      run_.reset();
      stop_ids_ = default_stop_ids();
      return json_value(info());
    });
  }

  // A fresh session: nothing consumed.
  val reset() {
    return guarded([&] {
      check_loaded();
      session_ = make_session(*model_, 1);
      run_.reset();
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
      GenerationConfig cfg;
      const std::vector<int64_t> prompt = parse_request(request, cfg);
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
      run_.reset();
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

  // A generation whose forward passes run outside the module: the WebGPU
  // backend (web/src/ssm_engine.mjs) computes the logits, the module does
  // everything else as generate() does, from the same code: the request's
  // options, the tokenizer, the sampler (the CLI's mt19937 draws), stop
  // tokens and strings, the streamed text and the session's bookkeeping
  // (pending, consumed, recent, position), so that state() writes the CLI's
  // state file once the caller has handed over the state's tensors.
  //
  // externalBegin(request) -> {feed, promptIds, maxTokens, argmaxOnly}: the
  //   caller feeds `feed` (the pending token and the prompt) in one forward;
  // then, per token, either externalStep(id) with the argmax of the last
  //   logits (allowed when argmaxOnly: greedy without a repetition penalty,
  //   where the sampler's choice is the argmax, ties to the smaller id), or
  //   the logits written into externalLogits() and externalStep(-1);
  //   each returns {token, piece, done}; unless done, the caller feeds token;
  // externalEnd(timings) -> generate()'s result, plus the text's last piece.
  val externalBegin(const std::string& request) {
    return guarded([&] {
      check_loaded();
      run_.reset();
      auto run = std::make_unique<ExternalRun>();
      run->prompt = parse_request(request, run->cfg);
      const GenerationConfig& cfg = run->cfg;
      cfg.sampling.validate();
      for (const std::string& stop : cfg.stop_strings)
        if (stop.empty()) throw Error("a stop string is empty");
      const int64_t V = model_->config().vocab_size;
      run->sampler.emplace(V, cfg.sampling, cfg.seed);
      run->logits.assign(static_cast<size_t>(V), 0.f);
      run->history = session_.recent[0];
      run->history.insert(run->history.end(), run->prompt.begin(), run->prompt.end());
      run->stops.emplace(run->cfg.stop_strings);
      if (tok_) run->out.emplace(*tok_, run->cfg.stop_strings, nullptr);
      std::vector<int64_t> feed;
      if (session_.pending[0] >= 0) feed.push_back(session_.pending[0]);
      feed.insert(feed.end(), run->prompt.begin(), run->prompt.end());
      run->fed = static_cast<int64_t>(feed.size());
      // The caller feeds these now: the session has consumed them.
      session_.consumed[0] += run->fed;
      session_.model.position += run->fed;
      session_.pending[0] = -1;
      const bool argmax_only = cfg.sampling.greedy() && cfg.sampling.repeat_penalty == 1.f;
      run->done = cfg.max_new_tokens == 0;
      Json doc = {{"feed", feed},
                  {"promptIds", run->prompt},
                  {"maxTokens", cfg.max_new_tokens},
                  {"argmaxOnly", argmax_only}};
      run_ = std::move(run);
      return json_value(doc);
    });
  }

  // Where the caller writes the last position's logits (vocab_size floats)
  // before externalStep(-1). A view of the module's memory: fetch it again
  // for every step (memory growth moves it).
  val externalLogits() {
    if (!run_) return error_value("no generation is running");
    return val(emscripten::typed_memory_view(run_->logits.size(), run_->logits.data()));
  }

  val externalStep(double chosen) {
    return guarded([&] {
      ExternalRun& run = running();
      if (run.done) throw Error("the generation has ended");
      const int64_t V = model_->config().vocab_size;
      int64_t tok;
      if (chosen >= 0) {
        if (!(run.cfg.sampling.greedy() && run.cfg.sampling.repeat_penalty == 1.f))
          throw Error(
              "externalStep: only a greedy run without a repetition penalty takes the argmax");
        tok = static_cast<int64_t>(chosen);
        if (tok >= V) throw Error(cat("externalStep: token ", tok, " is outside the vocabulary"));
      } else {
        const int64_t n = std::min<int64_t>(run.cfg.sampling.repeat_last_n,
                                            static_cast<int64_t>(run.history.size()));
        tok = run.sampler->sample(run.logits.data(),
                                  std::span<const int64_t>(run.history)
                                      .subspan(run.history.size() - static_cast<size_t>(n)));
      }
      // As Generator::generate: the stop token first, then stop strings, then the length.
      run.tokens.push_back(tok);
      run.history.push_back(tok);
      const bool stop_token = std::find(run.cfg.stop_tokens.begin(), run.cfg.stop_tokens.end(),
                                        tok) != run.cfg.stop_tokens.end();
      if (!stop_token && run.out) run.out->push(tok);
      if (stop_token) {
        run.finish = FinishReason::kStopToken;
        run.done = true;
      } else if (!run.cfg.stop_strings.empty() && run.stops->push(token_bytes(tok))) {
        run.finish = FinishReason::kStopString;
        run.done = true;
      } else if (static_cast<int64_t>(run.tokens.size()) >= run.cfg.max_new_tokens) {
        run.finish = FinishReason::kLength;
        run.done = true;
      }
      if (run.done) {
        session_.pending[0] = tok;
      } else {  // the caller feeds it next
        ++session_.consumed[0];
        ++session_.model.position;
        ++run.decoded;
      }
      return json_value({{"token", tok}, {"piece", run.new_text()}, {"done", run.done}});
    });
  }

  // timings: {prefillSeconds, decodeSeconds} measured by the caller.
  val externalEnd(const std::string& timings) {
    return guarded([&] {
      ExternalRun& run = running();
      if (run.out) run.out->finish(run.finish == FinishReason::kStopString);
      const std::string piece = run.new_text();
      const Json t = parse_json(timings, "timings");
      const size_t keep = std::min(run.history.size(), static_cast<size_t>(kSessionHistory));
      session_.recent[0].assign(run.history.end() - static_cast<std::ptrdiff_t>(keep),
                                run.history.end());
      Json doc = {{"promptIds", run.prompt},
                  {"ids", run.tokens},
                  {"text", run.out ? run.out->text() : std::string()},
                  {"finish", finish_reason_name(run.finish)},
                  {"seed", run.cfg.seed},
                  {"stats",
                   {{"prefillTokens", run.fed},
                    {"prefillSeconds", field<double>(t, "prefillSeconds", 0)},
                    {"decodeTokens", run.decoded},
                    {"decodeSeconds", field<double>(t, "decodeSeconds", 0)}}},
                  {"consumed", session_.consumed[0]},
                  {"piece", piece}};
      run_.reset();
      return json_value(doc);
    });
  }

  // Drops a generation the caller could not finish (its forward failed).
  void externalAbort() { run_.reset(); }

  // The session's layer-state tensors, each {name, dtype, shape: a JSON
  // array, data: the bytes}, KV caches cut to their length; and the position. For a state
  // held outside the module (WebGPU) after restore().
  val stateTensors() {
    return guarded([&] {
      check_loaded();
      val list = val::array();
      for (auto& [name, t] : session_tensors()) {
        Tensor v = *t;
        if (auto* a = attention_of(name)) {
          int64_t len = 0;
          for (int64_t b = 0; b < a->batch(); ++b) len = std::max(len, a->length(b));
          if (name.ends_with(".k") || name.ends_with(".v")) v = v.slice(2, 0, len).clone();
        }
        val e = val::object();
        e.set("name", name);
        e.set("dtype", std::string(dtype_name(v.dtype())));
        e.set("shape", Json(std::vector<int64_t>(v.shape().begin(), v.shape().end())).dump());
        e.set("data", val::global("Uint8Array")
                          .new_(emscripten::typed_memory_view(
                              v.nbytes(), static_cast<const uint8_t*>(v.raw()))));
        list.call<void>("push", e);
      }
      val out = val::object();
      out.set("tensors", list);
      out.set("position", static_cast<double>(session_.model.position));
      return out;
    });
  }

  // One layer-state tensor from outside (WebGPU's exportState()): its name,
  // shape (a JSON array) and bytes. The dtype and every dimension but a KV cache's
  // length must be those the model's state has.
  val setStateTensor(const std::string& name, const std::string& shape_json,
                     const std::string& bytes) {
    return guarded([&] {
      check_loaded();
      Tensor* target = nullptr;
      for (auto& [n, t] : session_tensors())
        if (n == name) target = t;
      if (!target) throw Error(cat("state: the model's state has no tensor '", name, "'"));
      const auto dims = parse_json(shape_json, "state tensor shape").get<std::vector<int64_t>>();
      const Shape shape(dims.begin(), dims.end());
      const bool cache = attention_of(name) && (name.ends_with(".k") || name.ends_with(".v"));
      bool fits = shape.size() == target->shape().size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = shape[d] == target->shape()[d] || (cache && d == 2);
      if (!fits)
        throw Error(cat("state: tensor '", name, "' is ", shape_str(shape), ", the model's ",
                        shape_str(target->shape())));
      Tensor t = Tensor::empty(target->dtype(), shape);
      if (t.nbytes() != bytes.size())
        throw Error(cat("state: tensor '", name, "' has ", bytes.size(), " bytes, its shape needs ",
                        t.nbytes()));
      std::memcpy(t.raw(), bytes.data(), bytes.size());
      *target = std::move(t);
      return val::object();
    });
  }

  val info_value() {
    return guarded([&] {
      check_loaded();
      return json_value(info());
    });
  }

 private:
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
    std::string new_text() {
      if (!out || out->text().size() <= sent) return {};
      const std::string piece = out->text().substr(sent);
      sent = out->text().size();
      return piece;
    }
  };

  ExternalRun& running() {
    check_loaded();
    if (!run_) throw Error("no generation is running");
    return *run_;
  }

  std::string_view token_bytes(int64_t id) const {
    return tok_ && id < tok_->vocab_size() ? tok_->token_bytes(static_cast<int32_t>(id))
                                           : std::string_view();
  }

  // The session's layer-state tensors by their state-file names.
  std::vector<std::pair<std::string, Tensor*>> session_tensors() {
    std::vector<std::pair<std::string, Tensor*>> out;
    for (size_t i = 0; i < session_.model.layers.size(); ++i)
      if (session_.model.layers[i])
        for (auto& [name, t] : session_.model.layers[i]->tensors())
          out.emplace_back(cat("layers.", i, ".", name), t);
    return out;
  }

  // The attention state a tensor name belongs to, or null.
  AttentionState* attention_of(const std::string& name) {
    const size_t dot = name.find('.', 7);  // after "layers."
    if (dot == std::string::npos) return nullptr;
    const size_t i = std::stoul(name.substr(7, dot - 7));
    if (i >= session_.model.layers.size()) return nullptr;
    return dynamic_cast<AttentionState*>(session_.model.layers[i].get());
  }

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
  std::vector<int64_t> parse_request(const std::string& request, GenerationConfig& cfg) const {
    const Json r = parse_json(request, "generate request");
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
    return prompt;
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
  std::unique_ptr<ExternalRun> run_;  // a generation driven from JavaScript
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
      .function("info", &Model::info_value)
      .function("externalBegin", &Model::externalBegin)
      .function("externalLogits", &Model::externalLogits)
      .function("externalStep", &Model::externalStep)
      .function("externalEnd", &Model::externalEnd)
      .function("externalAbort", &Model::externalAbort)
      .function("stateTensors", &Model::stateTensors)
      .function("setStateTensor", &Model::setStateTensor);
}
