// ssm init --config CONFIG.json --out DIR [--seed S]: a fresh model with the
// reference initialisation, written as DIR/config.json + DIR/model.safetensors.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "ssm/io/atomic_file.h"
#include "ssm/train/init.h"
#include "ssm/train/trainer.h"

namespace ssm::cli {
namespace {

struct InitArgs {
  std::string config, out;
  uint64_t seed = 0;
  bool force = false;
};

int run_init(const InitArgs& a) {
  namespace fs = std::filesystem;
  const std::string text = read_file(a.config);
  LanguageModel model(parse_model_config(parse_json(text, a.config), a.config));
  const fs::path out(a.out);
  if (fs::exists(out / "model.safetensors") && !a.force)
    throw Error(cat(out.string(), ": already holds model.safetensors (use --force to overwrite)"));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(cat(out.string(), ": cannot create directory: ", ec.message()));
  initialize_model(model, a.seed);
  write_file_atomically(out / "config.json", [&](FileWriter& w) { w.write(text); });
  save_model_weights(model, out / "model.safetensors");
  std::printf("initialised %s: %lld parameters, seed %llu\n", out.c_str(),
              static_cast<long long>(model.parameter_count()), static_cast<unsigned long long>(a.seed));
  return 0;
}

void setup_init(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("init", "create a freshly initialised model from a config.json");
  static InitArgs args;
  cmd->add_option("--config", args.config, "model config (state-spaces or HF convention)")
      ->type_name("FILE")->required()->check(input_file());
  cmd->add_option("--out", args.out, "directory to write config.json and model.safetensors to, created if missing")
      ->type_name("DIR")->required()->check(output_directory());
  cmd->add_option("-s,--seed", args.seed, "random seed of the initialisation")
      ->type_name("N")->capture_default_str()->check(unsigned_number());
  cmd->add_flag("--force", args.force, "overwrite a model already in --out");
  cmd->callback([&action] { action = [] { return run_init(args); }; });
}

}  // namespace

SSM_COMMAND(init, setup_init);

}  // namespace ssm::cli
