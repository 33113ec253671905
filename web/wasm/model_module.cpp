// The module's model (model_module.h): loading, the session's reset, the
// generate request as the CLI reads it, tokenizing and scoring.
#include "model_module.h"

#include <algorithm>
#include <filesystem>

#include "ssm/model/state_file.h"
#include "ssm/train/data.h"
#include "ssm/train/evaluate.h"

namespace ssm::web {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

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

// dir holds config.json, the weights and tokenizer.json (or a byte-level
// config). threads: the context's pool (1 in the single-threaded build).
val Model::load(const std::string& dir, int threads) {
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
val Model::reset() {
  return guarded([&] {
    check_loaded();
    session_ = make_session(*model_, 1);
    run_.reset();
    return json_value(info());
  });
}

// Held-out next-token loss of text, in windows of seqLen (as `ssm score --all`).
val Model::score(const std::string& request) {
  return guarded([&] {
    check_loaded();
    const Json r = parse_json(request, "score request");
    const std::vector<int32_t> ids = tokenizer().encode(field<std::string>(r, "text", ""));
    return json_value(eval_json(ids, field<int64_t>(r, "seqLen", 256)));
  });
}

val Model::tokenize(const std::string& text) {
  return guarded([&] {
    check_loaded();
    return json_value(Json(tokenizer().encode(text)));
  });
}

val Model::info_value() {
  return guarded([&] {
    check_loaded();
    return json_value(info());
  });
}

std::string_view Model::token_bytes(int64_t id) const {
  return tok_ && id < tok_->vocab_size() ? tok_->token_bytes(static_cast<int32_t>(id))
                                         : std::string_view();
}

std::vector<int64_t> Model::parse_request(const std::string& request, GenerationConfig& cfg) const {
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

void Model::check_loaded() const {
  if (!model_) throw Error("no model is loaded");
}

const Tokenizer& Model::tokenizer() const {
  if (!tok_) throw Error(tok_error_);
  return *tok_;
}

std::vector<int64_t> Model::default_stop_ids() const {
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

Json Model::eval_json(const std::vector<int32_t>& ids, int64_t seq_len) {
  const int64_t length = std::min<int64_t>(seq_len, static_cast<int64_t>(ids.size()));
  if (length < 2) throw Error(cat("score: the text is ", ids.size(), " tokens, too few to score"));
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

Json Model::info() const {
  return {{"vocabSize", model_->config().vocab_size},
          {"layers", model_->n_layer()},
          {"fingerprint", fingerprint_},
          {"consumed", session_.consumed[0]},
          {"pending", session_.pending[0]},
          {"threads", ctx_->pool().size()}};
}

}  // namespace ssm::web
