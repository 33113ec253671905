// ssm score MODEL --data FILE: held-out loss, perplexity and bits per byte of
// a text file (the split `ssm train` holds out; --all scores the whole file).
// ssm score MODEL --input F.safetensors: the loss of each row of input_ids.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/input_ids.h"
#include "cli/json_out.h"
#include "ssm/io/atomic_file.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/train/data.h"
#include "ssm/train/evaluate.h"
#include "ssm/train/model_grad.h"

namespace ssm::cli {
namespace {

struct ScoreArgs {
  std::string model, data, input;
  int64_t seq_len = 256, batch = 8, max_tokens = 1 << 20;
  double holdout = 0.05;
  bool all = false, json = false;
  ComputeOptions compute;
};

void print_text_score(const OrderedJson& j) {
  std::printf("%s tokens:   %lld (%lld bytes)\n", j["split"] == "all" ? "scored" : "held-out",
              j["tokens"].get<long long>(), j["bytes"].get<long long>());
  std::printf("loss:            %.6f nats/token\n", j["loss"].get<double>());
  std::printf("perplexity:      %.4f\n", j["perplexity"].get<double>());
  std::printf("bits per byte:   %.6f\n", j["bits_per_byte"].get<double>());
}

OrderedJson score_text(LanguageModel& model, const ScoreArgs& a, Context& ctx) {
  const auto tok = load_tokenizer_for_model(a.model);
  std::vector<int32_t> ids = tok->encode(read_file(a.data));
  const std::vector<int32_t> scored =
      a.all ? ids : split_tokens(std::move(ids), a.holdout, a.seq_len, cat("--data ", a.data)).held_out;
  const int64_t length = std::min<int64_t>(a.seq_len, static_cast<int64_t>(scored.size()));
  if (length < 2) throw Error(cat("--data ", a.data, ": ", scored.size(), " tokens, too few to score"));
  if (a.max_tokens < length)
    throw UsageError(cat("--max-tokens ", a.max_tokens, " is less than one window of ", length, " tokens (--seq-len)"));
  const auto windows = fixed_windows(scored, a.batch, length, a.max_tokens);
  const EvalResult r = evaluate_batches(
      model, windows, [&](int64_t id) { return static_cast<int64_t>(tok->token_bytes(id).size()); }, ctx);
  return {{"model", a.model}, {"data", a.data}, {"split", a.all ? "all" : "held-out"},
          {"tokens", r.tokens}, {"bytes", r.bytes}, {"loss", r.loss()},
          {"perplexity", r.perplexity()}, {"bits_per_byte", r.bits_per_byte()}};
}

OrderedJson score_input(LanguageModel& model, const ScoreArgs& a, Context& ctx) {
  const Tensor ids = read_input_ids(a.input, model.config().vocab_size);
  std::vector<double> pos;
  const LossSum total = model_loss(model, ids, ctx, &pos);
  const int64_t L = ids.dim(1);
  OrderedJson rows = OrderedJson::array();
  for (int64_t b = 0; b < ids.dim(0); ++b) {
    double s = 0;
    for (int64_t t = 0; t + 1 < L; ++t) s += pos[b * L + t];
    const double mean = L > 1 ? s / static_cast<double>(L - 1) : 0.0;
    rows.push_back({{"loss", mean}, {"perplexity", std::exp(mean)}});
  }
  return {{"model", a.model}, {"input", a.input}, {"rows", rows}, {"tokens", total.count},
          {"loss", total.mean()}, {"perplexity", std::exp(total.mean())}};
}

void print_input_score(const OrderedJson& j) {
  for (size_t b = 0; b < j["rows"].size(); ++b)
    std::printf("row %zu: loss %.6f perplexity %.4f\n", b, j["rows"][b]["loss"].get<double>(),
                j["rows"][b]["perplexity"].get<double>());
  std::printf("mean loss:  %.6f nats/token over %lld tokens\nperplexity: %.4f\n", j["loss"].get<double>(),
              j["tokens"].get<long long>(), j["perplexity"].get<double>());
}

int run_score(const ScoreArgs& a) {
  if (a.data.empty() == a.input.empty()) throw UsageError("give exactly one of --data FILE and --input FILE");
  if (!a.data.empty() && !a.all && a.holdout == 0)
    throw UsageError("--holdout 0 holds nothing out, which leaves nothing to score; give --all to score the whole file");
  LanguageModel model = LanguageModel::load(a.model, load_options(a.compute));
  Context ctx = make_context(a.compute);
  const OrderedJson j = a.data.empty() ? score_input(model, a, ctx) : score_text(model, a, ctx);
  if (a.json) print_json(j);
  else if (a.data.empty()) print_input_score(j);
  else print_text_score(j);
  return 0;
}

void setup_score(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("score", "held-out loss, perplexity and bits per byte");
  static ScoreArgs a;
  add_model_argument(*cmd, a.model, "model directory", WithoutModel::builtin);
  cmd->add_option("--data", a.data, "text file (its held-out split is scored) (required, or --input)")
      ->type_name("FILE")->check(input_file());
  cmd->add_option("--input", a.input, "safetensors file holding input_ids (batch, length) (required, or --data)")
      ->type_name("FILE")->check(input_file());
  cmd->add_option("--seq-len", a.seq_len, "window length in tokens")
      ->type_name("N")->capture_default_str()->check(whole_number(2, 1 << 20));
  cmd->add_option("--batch", a.batch, "windows per forward pass")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 4096));
  cmd->add_option("--holdout", a.holdout, "fraction of the file held out, as `ssm train` holds it out")
      ->type_name("F")->capture_default_str()->check(real_number(0, 0.9));
  cmd->add_option("--max-tokens", a.max_tokens, "score at most this many tokens")
      ->type_name("N")->capture_default_str()->check(whole_number(1));
  cmd->add_flag("--all", a.all, "score the whole file, not its held-out split");
  cmd->add_flag("--json", a.json, "print one JSON document");
  add_compute_options(*cmd, a.compute);
  cmd->callback([&action] { action = [] { return run_score(a); }; });
}

}  // namespace

SSM_COMMAND(score, setup_score);

}  // namespace ssm::cli
