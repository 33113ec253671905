// ssm generate [MODEL] -p TEXT | -f FILE | --prompt-ids IDS [--session FILE]:
// streams generated text to stdout as it is produced (or with --print-ids
// the ids, with --json one document at the end); the stats line goes to
// stderr. With --session the conversation continues from FILE's state and
// the new state is saved back, also when Ctrl-C stops the generation.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string_view>

#include "cli/commands.h"
#include "cli/generate_report.h"
#include "cli/id_list.h"
#include "cli/interrupt.h"
#include "cli/text_out.h"
#include "cli/text_source.h"
#include "ssm/model/state_file.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::cli {
namespace {

struct GenerateArgs {
  std::string model;
  TextSource prompt;
  std::string prompt_ids;
  bool print_ids = false, json = false, echo = false, quiet = false, ignore_eos = false, no_special = false;
  std::string session;
  int64_t max_tokens = 256;
  float temperature = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.f;
  int64_t top_k = 40, repeat_last_n = 64;
  uint64_t seed = 0;
  CLI::Option* seed_flag = nullptr;
  std::vector<std::string> stops;
  std::vector<int64_t> stop_ids;
  ComputeOptions compute;
};

// An eos_token_id value: one id or a list of them (HF writes both); null
// or absent: none. Anything else is an error naming `where`.
std::vector<int64_t> eos_ids(const Json& j, const std::string& where) {
  std::vector<int64_t> ids;
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return ids;
  const Json& v = j["eos_token_id"];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array())
    for (const Json& e : v) {
      if (!e.is_number_integer()) throw Error(cat(where, ": eos_token_id entries must be integers, got ", e.dump()));
      ids.push_back(e.get<int64_t>());
    }
  else
    throw Error(cat(where, ": eos_token_id must be an integer or a list of integers, got ", v.dump()));
  return ids;
}

// The end-of-text tokens stop generation unless --ignore-eos: those of the
// model's generation_config.json (what HF's generate uses), else
// config.json's eos_token_id, else the tokenizer's <|endoftext|>.
std::vector<int64_t> default_stop_ids(const LanguageModel& model, const Tokenizer* tok,
                                      const std::string& model_dir) {
  const std::filesystem::path gen = std::filesystem::path(model_dir) / "generation_config.json";
  if (std::filesystem::is_regular_file(gen)) {
    const std::vector<int64_t> ids = eos_ids(load_json_file(gen), gen.string());
    if (!ids.empty()) return ids;
  }
  const std::vector<int64_t> ids = eos_ids(model.config().source, model_dir + "/config.json");
  if (!ids.empty()) return ids;
  if (tok == nullptr) return {};
  if (const auto id = tok->token_to_id("<|endoftext|>")) return {*id};
  return {};
}

bool same_file(std::FILE* a, std::FILE* b) {
  struct stat sa, sb;
  return ::fstat(::fileno(a), &sa) == 0 && ::fstat(::fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Attention layers' caches grow with every token: refuse a --max-tokens
// whose caches would not fit, before the generation reserves them.
void check_cache_memory(LanguageModel& model, const SessionState& session, const GenerateArgs& a,
                        size_t prompt_tokens) {
  const uint64_t per_token = kv_cache_bytes_per_token(model.config());
  if (per_token == 0) return;
  const uint64_t limit = memory_limit(load_options(a.compute)),
                 weights = model_memory_bytes(model, model.projection_dtype());
  const long double tokens = static_cast<long double>(session.consumed[0]) + prompt_tokens + a.max_tokens;
  const long double need = tokens * per_token;
  if (need + weights > limit)
    throw UsageError(cat("--max-tokens ", a.max_tokens, ": the attention caches would need ",
                         format_bytes(static_cast<uint64_t>(std::min(need, 1.8e19L))), " beyond the weights' ",
                         format_bytes(weights), ", over the memory limit of ", format_bytes(limit),
                         " (--max-memory)"));
}

GenerationConfig generation_config(const GenerateArgs& a, const LanguageModel& model, const Tokenizer* tok) {
  GenerationConfig cfg;
  cfg.max_new_tokens = a.max_tokens;
  cfg.sampling = SamplingParams{.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                                .min_p = a.min_p, .repeat_penalty = a.repeat_penalty,
                                .repeat_last_n = a.repeat_last_n};
  cfg.seed = a.seed_flag->count() > 0 ? a.seed : fresh_seed();
  cfg.stop_strings = a.stops;
  for (const int64_t id : a.stop_ids) {
    if (id >= model.config().vocab_size)
      throw UsageError(cat("--stop-id ", id, ": outside the model's vocabulary [0, ", model.config().vocab_size, ")"));
    cfg.stop_tokens.push_back(id);
  }
  if (!a.ignore_eos)
    for (const int64_t id : default_stop_ids(model, tok, a.model)) cfg.stop_tokens.push_back(id);
  return cfg;
}

std::vector<int64_t> prompt_ids(const GenerateArgs& a, const std::string& prompt_text, const LanguageModel& model,
                                const Tokenizer* tok, const SessionState& session) {
  std::vector<int64_t> ids;
  if (!a.prompt_ids.empty()) {
    const int64_t vocab = model.config().vocab_size;
    ids = parse_id_list(a.prompt_ids, "--prompt-ids", [vocab](int64_t id) {
      return id >= 0 && id < vocab ? std::string() : cat("is outside the model's vocabulary [0, ", vocab, ")");
    });
  } else if (a.prompt.given()) {
    // A fresh text gets the tokenizer's special tokens (Llama's BOS) as HF's
    // default encoding does; a prompt that continues a session is mid-text.
    const bool special = !a.no_special && session.pending[0] < 0;
    for (const int32_t id : special ? tok->encode_with_special(prompt_text) : tok->encode(prompt_text))
      ids.push_back(id);
  }
  const bool continues = session.pending[0] >= 0;
  if (ids.empty() && !continues) {
    if (a.prompt.given()) throw UsageError(cat(a.prompt.flag(), ": the prompt is empty"));
    throw UsageError("no prompt: give -p TEXT, -f FILE ('-': standard input) or --prompt-ids IDS"
                     " (or continue a --session)");
  }
  return ids;
}

int run_generate(GenerateArgs& a) {
  Context ctx = make_context(a.compute);
  LanguageModel model = LanguageModel::load(a.model, load_options(a.compute));
  model.to_device(ctx.device());  // weights uploaded once (a no-op on the host)
  // Ids in, ids out needs no tokenizer; anything with text does.
  std::unique_ptr<Tokenizer> tok;
  if (!(a.print_ids && !a.prompt_ids.empty() && a.stops.empty())) tok = load_tokenizer_for_model(a.model);

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
  const std::string prompt_text = a.prompt.read();  // standard input can be read once
  GenerateReport report;
  report.prompt = prompt_ids(a, prompt_text, model, tok.get(), session);
  check_cache_memory(model, session, a, report.prompt.size());
  GenerationConfig cfg = generation_config(a, model, tok.get());
  report.seed = cfg.seed;

  Generator gen(model, ctx);
  std::unique_ptr<TextOut> text;
  if (tok) {
    gen.set_token_text([&](int64_t id) {
      return id < tok->vocab_size() ? tok->token_bytes(static_cast<int32_t>(id)) : std::string_view();
    });
    text = std::make_unique<TextOut>(*tok, cfg.stop_strings, a.print_ids || a.json ? nullptr : stdout);
    if (a.echo)
      text->echo(a.prompt.given() ? prompt_text
                                  : tok->decode(std::vector<int32_t>(report.prompt.begin(), report.prompt.end())));
  }
  const auto is_stop_id = [&](int64_t id) {
    return std::find(cfg.stop_tokens.begin(), cfg.stop_tokens.end(), id) != cfg.stop_tokens.end();
  };
  SequenceOutput out;
  {
    const InterruptCatcher interrupt;
    cfg.interrupt = &interrupt.flag();
    out = gen.generate(session, {report.prompt}, cfg, [&](int64_t, int64_t id) {
      if (text && !is_stop_id(id)) text->push(id);
      // Text nobody can receive (a full disk) is not worth generating.
      if (text && text->write_error() != 0) interrupt.request();
    })[0];
  }
  if (text) text->finish(out.finish == FinishReason::kStopString);
  report.generated = out.tokens;
  report.finish = out.finish;
  report.stats = gen.stats();

  if (a.print_ids) std::printf("%s\n", ids_line(report).c_str());
  if (a.json) {
    OrderedJson doc = report_json(report);
    doc["text"] = text ? OrderedJson(text->text()) : OrderedJson();
    doc["session"] = a.session.empty() ? OrderedJson() : OrderedJson(a.session);
    print_json(doc);
  }
  std::fflush(stdout);
  // The stats come first: a session that fails to save still shows the run.
  if (!a.quiet && !a.json) {
    // Where stderr goes into the same file (2>&1), the stats start a line;
    // stdout keeps the model's bytes as they are.
    if (text && !text->ends_line() && same_file(stdout, stderr)) std::fputc('\n', stderr);
    std::fprintf(stderr, "%s\n", stats_line(report).c_str());
  }
  if (!a.session.empty()) save_state(a.session, session, fingerprint);
  if (text && text->write_error() != 0)
    throw Error(cat("cannot write to standard output: ", std::strerror(text->write_error()),
                    a.session.empty() ? "" : cat("; the state reached is saved in ", a.session)));
  if (out.finish != FinishReason::kInterrupted) return 0;
  std::fprintf(stderr, "ssm: interrupted after %zu tokens%s\n", out.tokens.size(),
               a.session.empty() ? "" : cat("; the state reached is saved in ", a.session).c_str());
  return kExitInterrupted;
}

void setup_generate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt, streamed as it is produced");
  static GenerateArgs a;
  add_model_argument(*cmd, a.model, "model directory", WithoutModel::builtin);
  add_text_source(*cmd, a.prompt, "-p,--prompt", "prompt text", "prompt", /*required=*/false);
  cmd->add_option("--prompt-ids", a.prompt_ids, "the prompt as comma-separated token ids, e.g. 3,17,42")
                  ->type_name("IDS")->default_str("none")
                  ->excludes(a.prompt.text_flag)
                  ->excludes(a.prompt.file_flag);
  cmd->add_flag("--no-special", a.no_special,
                "encode the prompt text without the special tokens the tokenizer's post-processor adds "
                "(the BOS of Llama-style tokenizers); a prompt continuing a --session never gets them")
      ->excludes("--prompt-ids");
  auto* print_ids = cmd->add_flag("--print-ids", a.print_ids,
                                  "print token ids instead of text: one comma-separated line holding this run's "
                                  "prompt ids followed by the new ids (a stop token included)");
  auto* json = cmd->add_flag("--json", a.json,
                             "print one JSON document at the end instead of streaming: prompt_ids, ids, "
                             "finish_reason, seed, prefill and generated stats, text, session")
                   ->excludes(print_ids);
  cmd->add_flag("--echo", a.echo, "print the prompt before the generated text")->excludes(print_ids)->excludes(json);
  cmd->add_flag("-q,--quiet", a.quiet, "no stats line on stderr (--json puts the stats in its document instead)");
  cmd->add_option("-n,--max-tokens", a.max_tokens, "most new tokens to generate (0: only read the prompt)")
      ->type_name("N")->capture_default_str()->check(whole_number(0));
  cmd->add_option("--temperature,--temp", a.temperature, "sampling temperature; 0 is greedy")
      ->type_name("T")->capture_default_str()->check(real_number(0, 100));
  cmd->add_option("--top-k", a.top_k, "keep the k most likely tokens; 0 is off")
      ->type_name("K")->capture_default_str()->check(whole_number(0));
  cmd->add_option("--top-p", a.top_p, "keep the smallest set reaching this probability; 1 is off")
      ->type_name("P")->capture_default_str()->check(real_number(0, 1, /*min_excluded=*/true));
  cmd->add_option("--min-p", a.min_p, "drop tokens below min-p times the top probability; 0 is off")
      ->type_name("P")->capture_default_str()->check(real_number(0, 1));
  cmd->add_option("--repeat-penalty", a.repeat_penalty, "penalty on recent tokens; 1 is off")
      ->type_name("X")->capture_default_str()->check(real_number(0, 100, /*min_excluded=*/true));
  cmd->add_option("--repeat-last-n", a.repeat_last_n, "how many recent tokens the penalty sees")
      ->type_name("N")->capture_default_str()->check(whole_number(0, kSessionHistory));
  a.seed_flag = cmd->add_option("-s,--seed", a.seed, "random seed")
                    ->type_name("N")->default_str("a fresh one, printed in the stats line")->check(unsigned_number());
  cmd->add_option("--stop", a.stops, "stop when the text contains this string, which is not printed (repeatable)")
      ->type_name("TEXT")->default_str("none")->allow_extra_args(false)
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("the stop string is empty") : ""; }, ""));
  cmd->add_option("--stop-id", a.stop_ids, "stop after this token id, which is printed with --print-ids (repeatable)")
      ->type_name("ID")->default_str("none; the end-of-text token unless --ignore-eos")->allow_extra_args(false)->check(whole_number(0));
  cmd->add_flag("--ignore-eos", a.ignore_eos, "do not stop at the end-of-text token");
  cmd->add_option("--session", a.session,
                  "state file: continue the conversation saved there (if it exists), save it after, also on Ctrl-C")
      ->type_name("FILE")->default_str("none")->check(output_file());
  add_compute_options(*cmd, a.compute);
  cmd->callback([&action] { action = [] { return run_generate(a); }; });
}

}  // namespace

SSM_COMMAND(generate, setup_generate);

}  // namespace ssm::cli
