// ssm score MODEL --data FILE: held-out loss, perplexity and bits per byte of
// a text file (the split `ssm train` holds out; --all scores the whole file).
// ssm score MODEL --input F.safetensors: the loss of each row of input_ids.
#include <cstdio>

#include "cli/commands.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/safetensors.h"
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
  bool all = false;
  int threads = 1;
};

int score_text(LanguageModel& model, const ScoreArgs& a, Context& ctx) {
  const auto tok = load_tokenizer_for_model(a.model);
  std::vector<int32_t> ids = tok->encode(read_file(a.data));
  const std::vector<int32_t> scored =
      a.all ? ids : split_tokens(std::move(ids), a.holdout, a.seq_len, a.data).held_out;
  const auto windows = fixed_windows(scored, a.batch, std::min<int64_t>(a.seq_len, scored.size()),
                                     a.max_tokens);
  if (windows.empty()) throw Error(cat(a.data, ": too little text to score"));
  const EvalResult r = evaluate_batches(
      model, windows, [&](int64_t id) { return static_cast<int64_t>(tok->token_bytes(id).size()); }, ctx);
  std::printf("%s tokens:   %lld (%lld bytes)\n", a.all ? "scored" : "held-out",
              static_cast<long long>(r.tokens), static_cast<long long>(r.bytes));
  std::printf("loss:            %.6f nats/token\n", r.loss());
  std::printf("perplexity:      %.4f\n", r.perplexity());
  std::printf("bits per byte:   %.6f\n", r.bits_per_byte());
  return 0;
}

int score_input(LanguageModel& model, const ScoreArgs& a, Context& ctx) {
  const SafetensorsFile in = SafetensorsFile::open(a.input);
  if (!in.contains("input_ids")) throw Error(cat(a.input, ": no tensor named 'input_ids'"));
  const Tensor ids = in.get("input_ids").clone();
  std::vector<double> pos;
  const LossSum total = model_loss(model, ids, ctx, &pos);
  const int64_t L = ids.dim(1);
  for (int64_t b = 0; b < ids.dim(0); ++b) {
    double s = 0;
    for (int64_t t = 0; t + 1 < L; ++t) s += pos[b * L + t];
    const double mean = L > 1 ? s / static_cast<double>(L - 1) : 0.0;
    std::printf("row %lld: loss %.6f perplexity %.4f\n", static_cast<long long>(b), mean, std::exp(mean));
  }
  std::printf("mean loss:  %.6f nats/token over %lld tokens\nperplexity: %.4f\n", total.mean(),
              static_cast<long long>(total.count), std::exp(total.mean()));
  return 0;
}

int run_score(const ScoreArgs& a) {
  if (a.data.empty() == a.input.empty()) throw Error("score needs exactly one of --data and --input");
  LanguageModel model = LanguageModel::load(a.model, load_options());
  Context ctx(a.threads);
  return a.data.empty() ? score_input(model, a, ctx) : score_text(model, a, ctx);
}

void setup_score(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("score", "held-out loss, perplexity and bits per byte");
  static ScoreArgs args;
  cmd->add_option("MODEL", args.model, "model directory")->required();
  cmd->add_option("--data", args.data, "text file (its held-out split is scored)");
  cmd->add_option("--input", args.input, "safetensors file holding input_ids (batch, length)");
  cmd->add_option("--seq-len", args.seq_len, "window length in tokens")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--batch", args.batch, "windows per forward pass")->check(CLI::Range(1, 4096));
  cmd->add_option("--holdout", args.holdout, "fraction of the file held out")->check(CLI::Range(0.0, 0.9));
  cmd->add_option("--max-tokens", args.max_tokens, "score at most this many tokens");
  cmd->add_flag("--all", args.all, "score the whole file, not its held-out split");
  add_threads_option(*cmd, args.threads);
  add_max_memory_option(*cmd);
  cmd->callback([&action] { action = [] { return run_score(args); }; });
}

}  // namespace

SSM_COMMAND(score, setup_score);

}  // namespace ssm::cli
