// ssm train MODEL --data FILE --out DIR | --in-place [--wsla] [--resume]:
// trains on a text file through the model's tokenizer (raw bytes for a
// byte-level model), with a held-out split, a progress bar on a terminal
// (log lines otherwise), atomic checkpoints every N steps and on Ctrl-C, and
// exact resumption. Nothing is written before every input has been read.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/train_ranks.h"
#include "ssm/core/log.h"
#include "ssm/io/atomic_file.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/train/evaluate.h"
#include "ssm/train/trainer.h"

namespace ssm::cli {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string model, data, out;
  TrainOptions opt;
  bool resume = false, in_place = false;
  bool bf16 = false;  // products on bf16 tensor cores over the F32 weights
  int64_t checkpoint_every = 0, eval_every = 0, eval_tokens = 1 << 16, log_every = 10;
  int64_t stop_at = 0;  // stop (with a checkpoint) once this step is done; 0: run to the end
  double holdout = 0.05;
  ComputeOptions compute;
  DataParallelArgs parallel;
  CLI::App* cmd = nullptr;
};

// Training writes its weights into the output directory: never into MODEL
// unless asked to.
fs::path output_dir(const TrainArgs& a) {
  if (a.in_place) {
    // Found out before the run, not when its weights are saved at the end.
    if (::access(a.model.c_str(), W_OK | X_OK) != 0)
      throw UsageError(cat("--in-place: cannot write in ", a.model, ": ", std::strerror(errno)));
    return a.model;
  }
  if (a.out.empty())
    throw UsageError("--out DIR is required: the directory for the trained weights (or --in-place to "
                     "overwrite MODEL's own)");
  std::error_code ec;
  if (fs::equivalent(a.out, a.model, ec))
    throw UsageError(cat("--out ", a.out, " is MODEL itself; give --in-place to overwrite MODEL's weights"));
  return a.out;
}

// Values that are each fine but do not fit together.
void check_schedule(const TrainArgs& a, const TrainOptions& opt) {
  if (a.stop_at > opt.steps)
    throw UsageError(cat("--stop-at ", a.stop_at, " is past the last step (--steps ", opt.steps, ")"));
  if (a.holdout == 0 && a.cmd->count("--eval-every") > 0 && a.eval_every > 0)
    throw UsageError("--eval-every needs a held-out part, and --holdout is 0");
  if (a.holdout > 0 && a.eval_tokens < opt.seq_len)
    throw UsageError(cat("--eval-tokens ", a.eval_tokens, " is less than one window of --seq-len ", opt.seq_len,
                         " tokens"));
  if (opt.warmup >= opt.steps)
    log_warning("--warmup ", opt.warmup, " is not shorter than the run (--steps ", opt.steps,
                "): the learning rate never reaches --lr ", opt.lr);
}

// config.json and tokenizer.json go with the weights.
void copy_model_files(const fs::path& src, const fs::path& out, bool resume) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(cat(out.string(), ": cannot create directory: ", ec.message()));
  for (const char* f : {"config.json", "tokenizer.json"}) {
    if (!fs::exists(src / f) || (resume && fs::exists(out / f))) continue;
    const std::string text = read_file(src / f);
    write_file_atomically(out / f, [&](FileWriter& w) { w.write(text); });
  }
}

std::string duration(double s) {
  const long t = static_cast<long>(s);
  return t >= 3600 ? cat(t / 3600, "h", (t / 60) % 60, "m") : cat(t / 60, "m", t % 60, "s");
}

// On resume the checkpoint's options rule; one given on the command line that
// differs is an error rather than a silently different run.
TrainOptions resumed_options(const TrainArgs& a, const fs::path& checkpoint) {
  const TrainOptions stored = read_checkpoint_options(checkpoint);
  const Json s = stored.to_json(), given = a.opt.to_json();
  const std::pair<const char*, const char*> flags[] = {
      {"steps", "--steps"}, {"batch", "--batch"}, {"seq_len", "--seq-len"},
      {"accumulation", "--accumulation"}, {"lr", "--lr"}, {"warmup", "--warmup"},
      {"weight_decay", "--weight-decay"}, {"clip", "--clip"}, {"seed", "--seed"}, {"wsla", "--wsla"},
      {"dropout", "--dropout"}};
  // dropout is stored only when above 0.
  const auto at = [](const Json& j, const char* key) { return j.contains(key) ? j[key] : Json(0); };
  for (const auto& [key, flag] : flags)
    if (a.cmd->count(flag) && at(s, key) != at(given, key))
      throw Error(cat(checkpoint.string(), ": was made with ", flag, " ", at(s, key).dump(),
                      "; resume with the checkpoint's options"));
  TrainOptions o = stored;
  o.recompute = a.opt.recompute;  // not stored: it does not change the run
  return o;
}

// --bf16 needs a backend with bf16 compute: refused before anything is read
// or written.
void check_bf16(const TrainArgs& a) {
  if (!a.bf16) return;
  Context probe = make_context(a.compute);
  if (!(probe.resources() && probe.resources()->set_bf16_compute(true)))
    throw UsageError(cat("--bf16: backend '", a.compute.backend, "' has no bf16 compute (use --backend cuda)"));
}

int run_train(TrainArgs& a) {
  require_f32_weights(a.compute, "training");
  const fs::path src(a.model), out = output_dir(a);
  const fs::path checkpoint = out / "checkpoint.safetensors";
  if (a.resume && !fs::exists(checkpoint))
    throw UsageError(cat("--resume: ", checkpoint.string(), ": no checkpoint to resume from"));
  // Starting over would replace an earlier run's checkpoint (at the end, or
  // on Ctrl-C) that a forgotten --resume meant to continue. MODEL's own
  // checkpoint (--in-place) is where its weights came from: training again is
  // the point.
  if (!a.resume && !a.in_place && fs::exists(checkpoint))
    throw UsageError(cat("--out ", a.out, ": holds ", checkpoint.string(),
                         " of an earlier run; --resume continues it, or remove it (or give another --out) "
                         "to start over"));
  // --gpus N: this process only starts and watches the ranks.
  if (const auto code = launch_ranks_if_asked(a.parallel, a.compute.backend)) return *code;
  // A rank of a data-parallel run (torchrun's variables) joins the others
  // before it touches a GPU. Rank 0 alone writes, evaluates and prints.
  const std::unique_ptr<Rank> rank = Rank::join(a.parallel, a.compute.backend);
  const bool root = !rank || rank->root();
  check_bf16(a);
  TrainOptions opt = a.resume ? resumed_options(a, checkpoint) : a.opt;
  // This run's ranks, whatever a checkpoint says (its options must then agree).
  opt.world = rank ? rank->world() : 1;
  opt.rank = rank ? rank->rank() : 0;
  check_schedule(a, opt);
  const std::string text = read_file(a.data);
  LanguageModel model = LanguageModel::load(a.resume ? out : src, load_options(a.compute));
  const auto tok = load_tokenizer_for_model(src);
  if (tok->vocab_size() > model.config().vocab_size)
    throw Error(cat(src.string(), ": the tokenizer has ", tok->vocab_size(),
                    " ids but the model's vocabulary is ", model.config().vocab_size));
  const TokenSplit data = split_tokens(tok->encode(text), a.holdout, opt.seq_len, cat("--data ", a.data));
  const auto held_out = fixed_windows(data.held_out, opt.batch, opt.seq_len, a.eval_tokens);
  auto bytes_of = [&](int64_t id) { return static_cast<int64_t>(tok->token_bytes(id).size()); };
  if (out != src && root) copy_model_files(src, out, a.resume);

  Context ctx = make_context(a.compute);
  if (a.bf16) ctx.resources()->set_bf16_compute(true);  // checked by check_bf16
  // Weights, gradients and AdamW moments live on the backend's device;
  // checkpoints are written from host copies (any device resumes them).
  model.to_device(ctx.device());
  Trainer trainer(model, data.train, opt, ctx);
  if (a.resume) trainer.load_checkpoint(checkpoint);
  if (rank) rank->attach(trainer, ctx);
  // The other ranks say nothing on stdout: rank 0 speaks for the run.
  if (!root && !std::freopen("/dev/null", "w", stdout)) throw Error("cannot silence a rank's stdout");
  std::printf("training %s: %lld train / %lld held-out tokens, %lld steps of %lld x %lld x %lld%s%s%s\n",
              out.c_str(), static_cast<long long>(data.train.size()),
              static_cast<long long>(data.held_out.size()), static_cast<long long>(opt.steps),
              static_cast<long long>(opt.batch * opt.world), static_cast<long long>(opt.seq_len),
              static_cast<long long>(opt.accumulation), opt.wsla ? ", WSLA" : "",
              opt.dropout > 0 ? cat(", dropout ", opt.dropout).c_str() : "",
              a.resume ? cat(", resuming at step ", trainer.steps_done()).c_str() : "");
  std::fflush(stdout);

  const bool tty = ::isatty(STDOUT_FILENO);
  std::optional<InterruptCatcher> interrupt(std::in_place);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = trainer.steps_done();
  int64_t tokens = 0;
  int64_t evaluated_at = -1;
  auto evaluate = [&] {
    if (evaluated_at == trainer.steps_done()) return;
    evaluated_at = trainer.steps_done();
    const EvalResult r = evaluate_batches(model, held_out, bytes_of, ctx);
    std::printf("%sstep %lld held-out loss %.6f perplexity %.3f bits/byte %.4f\n", tty ? "\n" : "",
                static_cast<long long>(trainer.steps_done()), r.loss(), r.perplexity(), r.bits_per_byte());
  };
  auto stop_here = [&] { return a.stop_at > 0 && trainer.steps_done() >= a.stop_at; };
  // Every rank stops at the same step: a Ctrl-C seen by one is seen by all.
  bool interrupted = false;
  auto interrupted_now = [&] {
    interrupted = rank ? rank->any(interrupt->requested()) : interrupt->requested();
    return interrupted;
  };
  // The steps that print their loss (every one on a terminal): the others
  // do not wait for a device to report it.
  const auto logged = [&](int64_t step) {
    return tty || step % a.log_every == 0 || step == opt.steps || step == first + 1;
  };
  while (!trainer.finished() && !stop_here() && !interrupted_now()) {
    const StepReport r = trainer.step(logged(trainer.steps_done() + 1));
    tokens += r.tokens;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = static_cast<double>(tokens) / std::max(secs, 1e-9);
    const double eta = secs / static_cast<double>(r.step - first) * static_cast<double>(opt.steps - r.step);
    if (tty) {
      const int width = 24, done = static_cast<int>(width * r.step / std::max<int64_t>(1, opt.steps));
      std::printf("\r[%s%s] step %lld/%lld loss %.4f | %.0f tok/s | ETA %s   ",
                  std::string(done, '#').c_str(), std::string(width - done, '.').c_str(),
                  static_cast<long long>(r.step), static_cast<long long>(opt.steps), r.loss, tps,
                  duration(eta).c_str());
    } else if (logged(r.step)) {
      std::printf("step %lld/%lld loss %.9g lr %.3g grad_norm %.4g tok/s %.0f eta %s%s\n",
                  static_cast<long long>(r.step), static_cast<long long>(opt.steps), r.loss, r.lr,
                  r.grad_norm, tps, duration(eta).c_str(),
                  r.comm_wait_ms >= 0 ? cat(" comm_wait_ms ", r.comm_wait_ms).c_str() : "");
    }
    std::fflush(stdout);
    if (!root) continue;
    if (a.checkpoint_every > 0 && r.step % a.checkpoint_every == 0) trainer.save_checkpoint(out);
    if (a.eval_every > 0 && r.step % a.eval_every == 0 && !held_out.empty()) evaluate();
  }
  if (!rank) interrupted = interrupt->requested();  // also during the last step
  interrupt.reset();  // a Ctrl-C while saving kills; the checkpoint is written atomically
  if (!root) return interrupted ? kExitInterrupted : 0;
  trainer.save_checkpoint(out);
  if (interrupted) {
    std::printf("%sinterrupted: checkpoint at step %lld saved in %s (continue with --resume)\n",
                tty ? "\n" : "", static_cast<long long>(trainer.steps_done()), out.c_str());
    return kExitInterrupted;
  }
  if (!trainer.finished()) {
    std::printf("%sstopped at step %lld: checkpoint saved in %s (continue with --resume)\n",
                tty ? "\n" : "", static_cast<long long>(trainer.steps_done()), out.c_str());
    return 0;
  }
  if (!held_out.empty()) evaluate();
  std::printf("done: %lld steps, weights in %s\n", static_cast<long long>(trainer.steps_done()),
              (out / "model.safetensors").c_str());
  return 0;
}

void setup_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "train or fine-tune a model on a text file");
  static TrainArgs a;
  a.cmd = cmd;
  TrainOptions& o = a.opt;
  const auto count = [](int64_t min, int64_t max = int64_t{1} << 40) { return whole_number(min, max); };
  add_model_argument(*cmd, a.model, "model directory (config.json, weights, tokenizer.json)", WithoutModel::refuse);
  cmd->add_option("--data", a.data, "text file to train on")->type_name("FILE")->required()->check(input_file());
  auto* out = cmd->add_option("--out", a.out, "directory for the trained weights and checkpoints, created if "
                              "missing (required unless --in-place)")
                  ->type_name("DIR")->check(output_directory());
  cmd->add_flag("--in-place", a.in_place, "write the trained weights over MODEL's own")->excludes(out);
  cmd->add_flag("--wsla", o.wsla, "fast-adapt: train only the B and C rows of each SSM in_proj");
  cmd->add_flag("--resume", a.resume, "continue from the checkpoint in the output directory");
  cmd->add_option("--steps", o.steps, "optimizer steps")->type_name("N")->capture_default_str()->check(count(1));
  cmd->add_option("--batch", o.batch, "sequences per micro-batch")
      ->type_name("N")->capture_default_str()->check(count(1, 4096));
  cmd->add_option("--seq-len", o.seq_len, "tokens per sequence")
      ->type_name("N")->capture_default_str()->check(count(2, 1 << 20));
  cmd->add_option("--accumulation", o.accumulation, "micro-batches per step")
      ->type_name("N")->capture_default_str()->check(count(1, 4096));
  cmd->add_option("--lr", o.lr, "peak learning rate")
      ->type_name("X")->capture_default_str()->check(real_number(0, 10, /*min_excluded=*/true));
  cmd->add_option("--warmup", o.warmup, "warmup steps")->type_name("N")->capture_default_str()->check(count(0));
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      ->type_name("X")->capture_default_str()->check(real_number(0, 10));
  cmd->add_option("--clip", o.clip, "global gradient-norm clip (0: none)")
      ->type_name("X")->capture_default_str()->check(real_number(0, 1e9));
  cmd->add_option("--dropout", o.dropout,
                  "residual dropout: the probability of zeroing each element of the embedding's and of "
                  "every layer's output in training (0: none)")
      ->type_name("P")->capture_default_str()->check(real_number(0, 1, false, /*max_excluded=*/true));
  cmd->add_option("-s,--seed", o.seed, "data-sampling and dropout seed")
      ->type_name("N")->capture_default_str()->check(unsigned_number());
  cmd->add_option("--checkpoint-every", a.checkpoint_every, "checkpoint every N steps (0: only at the end)")
      ->type_name("N")->capture_default_str()->check(count(0));
  cmd->add_option("--eval-every", a.eval_every, "held-out evaluation every N steps (0: only at the end)")
      ->type_name("N")->capture_default_str()->check(count(0));
  cmd->add_option("--eval-tokens", a.eval_tokens, "held-out tokens per evaluation (at least --seq-len)")
      ->type_name("N")->capture_default_str()->check(count(1));
  cmd->add_option("--log-every", a.log_every, "log line every N steps (when not on a terminal)")
      ->type_name("N")->capture_default_str()->check(count(1));
  cmd->add_option("--stop-at", a.stop_at, "stop after this step with a checkpoint, the schedule still spanning "
                  "--steps (0: run to the end)")
      ->type_name("N")->capture_default_str()->check(count(0));
  cmd->add_option("--holdout", a.holdout, "fraction of the file held out for evaluation (0: none)")
      ->type_name("F")->capture_default_str()->check(real_number(0, 0.9));
  cmd->add_flag("--recompute", a.opt.recompute,
                "recompute each block's internals in the backward instead of keeping them "
                "(less memory, the same results)");
  cmd->add_flag("--bf16", a.bf16,
                "mixed precision (--backend cuda): products on bf16 tensor cores, weights, AdamW moments "
                "and scan states in F32");
  add_compute_options(*cmd, a.compute, WeightUse::kTraining);
  add_data_parallel_options(*cmd, a.parallel);
  cmd->callback([&action] { action = [] { return run_train(a); }; });
}

}  // namespace

SSM_COMMAND(train, setup_train);

}  // namespace ssm::cli
