// ssm init --config CONFIG.json --out DIR [--seed S] [--dtype T] [--shard-size SIZE]:
// a fresh model with the reference initialisation, written as DIR/config.json
// and safetensors weights laid out as on the HF hub (one model.safetensors,
// or shards and their index). Streamed: each parameter is drawn, rounded to
// the weights' dtype, written and freed before the next, so that a model of
// many gigabytes is made in the memory of its largest tensor.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/interrupt.h"
#include "cli/usage_error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/train/init.h"

namespace ssm::cli {
namespace {

struct InitArgs {
  std::string config, out;
  uint64_t seed = 0;
  bool force = false;
  std::string dtype = "f32";
  uint64_t shard_bytes = uint64_t{5} << 30;  // as transformers' save_pretrained
};

// Thrown out of the writer on Ctrl-C: the temp files are removed on the way out.
struct Interrupted {};

DType init_dtype(const std::string& name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "f16") return DType::kF16;
  return DType::kF32;
}

int run_init(const InitArgs& a) {
  namespace fs = std::filesystem;
  const std::string text = read_file(a.config);
  const int64_t parameters = LanguageModel(parse_model_config(parse_json(text, a.config), a.config)).parameter_count();
  const fs::path out(a.out);
  for (const char* name : {"model.safetensors", "model.safetensors.index.json"})
    if (fs::exists(out / name) && !a.force)
      throw Error(cat(out.string(), ": already holds ", name, " (use --force to overwrite)"));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(cat(out.string(), ": cannot create directory: ", ec.message()));

  InterruptCatcher interrupt;
  const ShardedWriteOptions options{.shard_bytes = a.shard_bytes, .companions = {}, .check_stop = [&] {
                                      if (interrupt.requested()) throw Interrupted{};
                                    }};
  ShardedWriteResult written;
  try {
    written = write_initialized_model(text, a.config, out, a.seed, init_dtype(a.dtype), options);
  } catch (const Interrupted&) {
    std::fprintf(stderr, "interrupted: nothing written to %s\n", out.c_str());
    return kExitInterrupted;
  }
  std::printf("initialised %s: %lld parameters (%s of weights in %zu file%s, projections %s), seed %llu\n",
              out.c_str(), static_cast<long long>(parameters),
              format_bytes(written.data_bytes).c_str(), written.files.size(),
              written.files.size() == 1 ? "" : "s", a.dtype.c_str(), static_cast<unsigned long long>(a.seed));
  return 0;
}

void setup_init(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("init", "create a freshly initialised model from a config.json");
  static InitArgs args;
  cmd->add_option("--config", args.config, "model config (state-spaces or HF convention)")
      ->type_name("FILE")->required()->check(input_file());
  cmd->add_option("--out", args.out, "directory to write config.json and the weights to, created if missing")
      ->type_name("DIR")->required()->check(output_directory());
  cmd->add_option("-s,--seed", args.seed, "random seed of the initialisation")
      ->type_name("N")->capture_default_str()->check(unsigned_number());
  cmd->add_option("--dtype", args.dtype,
                  "dtype of the projection matrices as written (drawn in f32, then rounded); norms, "
                  "conv and scan parameters stay f32: f32, bf16, f16")
      ->type_name("TYPE")->capture_default_str()->check(one_of({"f32", "bf16", "f16"}));
  cmd->add_option_function<std::string>(
         "--shard-size", [](const std::string& text) { args.shard_bytes = parse_memory_size(text); },
         "weight bytes per safetensors file at most (a larger tensor gets a file to itself); more "
         "than one file: model-00001-of-0000N.safetensors and model.safetensors.index.json")
      ->type_name("SIZE")->default_str("5G")->check(memory_size());
  cmd->add_flag("--force", args.force, "overwrite a model already in --out");
  cmd->callback([&action] { action = [] { return run_init(args); }; });
}

}  // namespace

SSM_COMMAND(init, setup_init);

}  // namespace ssm::cli
