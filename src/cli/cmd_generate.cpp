// ssm generate [MODEL_DIR] --prompt TEXT | --prompt-ids IDS [--session FILE]:
// streams generated text to stdout as it is produced, or with --print-ids the
// ids; prefill and decode speed go to stderr at the end. With --session the
// conversation continues from FILE's state and the new state is saved back.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string_view>

#include "cli/commands.h"
#include "ssm/model/generator.h"
#include "ssm/model/state_file.h"
#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::cli {
namespace {

// The built-in default model: models/default in the source tree this
// program was built from.
std::filesystem::path default_model_dir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "models" / "default";
}

struct GenerateArgs {
  std::string model;
  std::string prompt, prompt_ids;
  bool print_ids = false;
  std::string session;
  int64_t max_tokens = 256;
  float temperature = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.f;
  int64_t top_k = 40, repeat_last_n = 64;
  int64_t seed = -1;
  std::vector<std::string> stops;
  std::vector<int64_t> stop_ids;
  bool ignore_eos = false;
  int threads = 0;
};

std::vector<int64_t> parse_ids(std::string_view list) {
  std::vector<int64_t> ids;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || id < 0)
      throw Error(cat("--prompt-ids: '", item, "' is not a token id (expected e.g. 3,17,42)"));
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return ids;
}

// The end-of-text token stops generation unless --ignore-eos: config.json's
// eos_token_id, else the tokenizer's <|endoftext|>.
std::vector<int64_t> default_stop_ids(const LanguageModel& model, const Tokenizer& tok) {
  const Json& src = model.config().source;
  if (src.contains("eos_token_id") && src["eos_token_id"].is_number_integer())
    return {src["eos_token_id"].get<int64_t>()};
  if (const auto id = tok.token_to_id("<|endoftext|>")) return {*id};
  return {};
}

// Prints decoded text as it completes, holding back the bytes that could
// still turn out to begin a stop string, which is never printed.
class TextOut {
 public:
  TextOut(const Tokenizer& tok, const std::vector<std::string>& stops) : decoder_(tok), stops_(stops) {
    for (const std::string& s : stops) hold_ = std::max(hold_, s.size() > 0 ? s.size() - 1 : 0);
  }
  void push(int64_t id) {
    held_ += decoder_.push(static_cast<int32_t>(id));
    size_t cut = held_.size() > hold_ ? held_.size() - hold_ : 0;
    while (cut > 0 && cut < held_.size() && (static_cast<unsigned char>(held_[cut]) & 0xC0) == 0x80) --cut;
    emit(cut);
  }
  void finish(bool stopped_by_string) {
    held_ += decoder_.finish();
    size_t end = held_.size();
    if (stopped_by_string)
      for (const std::string& s : stops_) end = std::min(end, held_.find(s));
    emit(end);
    held_.clear();
    if (printed_) std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  void emit(size_t n) {
    if (n == 0) return;
    std::fwrite(held_.data(), 1, n, stdout);
    std::fflush(stdout);
    held_.erase(0, n);
    printed_ = true;
  }
  StreamingDecoder decoder_;
  const std::vector<std::string>& stops_;
  size_t hold_ = 0;
  std::string held_;
  bool printed_ = false;
};

int run_generate(GenerateArgs a) {
  if (a.model.empty()) {
    a.model = default_model_dir().string();
    if (!std::filesystem::exists(std::filesystem::path(a.model) / "config.json"))
      throw Error(cat("no MODEL_DIR given and the default model (", a.model, ") is not there"));
  }
  if (!a.prompt.empty() && !a.prompt_ids.empty()) throw Error("give --prompt or --prompt-ids, not both");
  Context ctx(a.threads);
  LanguageModel model = LanguageModel::load(a.model, load_options());
  const auto tok = load_tokenizer_for_model(a.model);

  std::vector<int64_t> prompt;
  if (!a.prompt_ids.empty()) prompt = parse_ids(a.prompt_ids);
  else for (const int32_t id : tok->encode(a.prompt)) prompt.push_back(id);

  GenerationConfig cfg;
  cfg.max_new_tokens = a.max_tokens;
  cfg.sampling = SamplingParams{.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                                .min_p = a.min_p, .repeat_penalty = a.repeat_penalty,
                                .repeat_last_n = a.repeat_last_n};
  cfg.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  cfg.stop_strings = a.stops;
  cfg.stop_tokens = a.stop_ids;
  if (!a.ignore_eos)
    for (int64_t id : default_stop_ids(model, *tok)) cfg.stop_tokens.push_back(id);

  // The session: restored when its file exists, saved back at the end.
  std::string fingerprint;
  SessionState session;
  if (!a.session.empty()) fingerprint = model_fingerprint(model, ctx);
  if (!a.session.empty() && std::filesystem::exists(a.session)) {
    session = load_state(a.session, model, fingerprint);
    if (session.batch() != 1)
      throw Error(cat(a.session, ": holds ", session.batch(), " sequences, generate continues one"));
  } else {
    session = make_session(model, 1);
  }

  Generator gen(model, ctx);
  gen.set_token_text([&](int64_t id) {
    return id < tok->vocab_size() ? tok->token_bytes(static_cast<int32_t>(id)) : std::string_view();
  });
  TextOut text(*tok, cfg.stop_strings);
  const auto is_stop_id = [&](int64_t id) {
    return std::find(cfg.stop_tokens.begin(), cfg.stop_tokens.end(), id) != cfg.stop_tokens.end();
  };
  const auto out = gen.generate(session, {prompt}, cfg, [&](int64_t, int64_t id) {
    if (!a.print_ids && !is_stop_id(id)) text.push(id);
  })[0];

  if (a.print_ids) {
    std::string line;
    for (int64_t id : prompt) line += cat(line.empty() ? "" : ",", id);
    for (int64_t id : out.tokens) line += cat(line.empty() ? "" : ",", id);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  } else {
    text.finish(out.finish == FinishReason::kStopString);
  }
  if (!a.session.empty()) save_state(a.session, session, fingerprint);

  const GenerationStats& st = gen.stats();
  auto rate = [](int64_t n, double s) { return s > 0 ? n / s : 0.0; };
  std::fprintf(stderr,
               "prefill: %lld tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s "
               "(%.1f tokens/s); stopped by %s; seed %llu\n",
               static_cast<long long>(st.prefill_tokens), st.prefill_seconds,
               rate(st.prefill_tokens, st.prefill_seconds), static_cast<long long>(st.decode_tokens),
               st.decode_seconds, rate(st.decode_tokens, st.decode_seconds),
               finish_reason_name(out.finish), static_cast<unsigned long long>(cfg.seed));
  return 0;
}

void setup_generate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt, streamed as it is produced");
  add_max_memory_option(*cmd);
  static GenerateArgs args;
  cmd->option_defaults()->always_capture_default();
  cmd->add_option("MODEL_DIR", args.model,
                  "model directory (default: models/default of the source tree)");
  auto* text = cmd->add_option("--prompt", args.prompt, "prompt text");
  cmd->add_option("--prompt-ids", args.prompt_ids, "prompt as comma-separated token ids, e.g. 3,17,42")
      ->excludes(text);
  cmd->add_flag("--print-ids", args.print_ids,
                "print token ids instead of text: one comma-separated line holding this run's "
                "prompt ids followed by the new ids (a stop token included)");
  cmd->add_option("--max-tokens", args.max_tokens, "most new tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", args.temperature, "sampling temperature; 0 is greedy");
  cmd->add_option("--top-k", args.top_k, "keep the k most likely tokens; 0 is off");
  cmd->add_option("--top-p", args.top_p, "keep the smallest set reaching this probability; 1 is off");
  cmd->add_option("--min-p", args.min_p, "drop tokens below min-p times the top probability; 0 is off");
  cmd->add_option("--repeat-penalty", args.repeat_penalty, "penalty on recent tokens; 1 is off");
  cmd->add_option("--repeat-last-n", args.repeat_last_n, "how many recent tokens the penalty sees");
  cmd->add_option("--seed", args.seed, "random seed (default: a fresh one, reported on stderr)");
  cmd->add_option("--stop", args.stops, "stop when the text contains this string (repeatable; not printed)")
      ->allow_extra_args(false);
  cmd->add_option("--stop-id", args.stop_ids, "stop after this token id (repeatable)")->allow_extra_args(false);
  cmd->add_flag("--ignore-eos", args.ignore_eos, "do not stop at the end-of-text token");
  cmd->add_option("--session", args.session,
                  "state file: continue the conversation saved there (if it exists), save it after");
  cmd->add_option("--threads", args.threads, "worker threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->callback([&action] { action = [] { return run_generate(args); }; });
}

}  // namespace

SSM_COMMAND(generate, setup_generate);

}  // namespace ssm::cli
