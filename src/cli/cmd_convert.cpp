// ssm convert SRC_DIR DST_DIR: any checkpoint open_checkpoint reads (single
// or sharded safetensors, pytorch_model.bin, sharded .bin) -> DST_DIR with
// model.safetensors, config.json and tokenizer.json if present. The dtypes
// are kept, or with --dtype the model is loaded as `--dtype` loads it
// (projections converted, rounded to nearest; norms, conv and scan
// parameters F32) and its parameters written: a BF16 copy is half the
// file and loads as BF16 by default.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "cli/compute_options.h"
#include "cli/flags.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/checkpoint.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/config.h"
#include "ssm/model/language_model.h"

namespace ssm::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string src, dst;
  std::string dtype = "keep";
  bool force = false;
};

// A tied model's head is its embedding: PyTorch checkpoints list it under
// lm_head.weight too (one storage, two names). Written once, as HF writes
// tied safetensors; the loader takes the head from the embedding.
bool is_tied_copy(const ModelConfig& config, const std::string& name, const Tensor& t, const TensorSource& source) {
  if (!config.tie_embeddings || name != "lm_head.weight") return false;
  const std::optional<Tensor> embedding = source.find(config.embedding_name());
  return embedding && embedding->same_layout(t) && std::memcmp(embedding->raw(), t.raw(), t.nbytes()) == 0;
}

struct Converted {
  NamedTensors tensors;
  size_t bytes = 0;
  std::string from;
};

// Every tensor as stored (names and dtypes kept; a tied head written once).
Converted stored_tensors(const fs::path& src) {
  const ModelConfig config = load_model_config(src / "config.json");
  const std::unique_ptr<TensorSource> source = open_checkpoint(src);
  Converted out{.from = source->describe()};
  for (const std::string& name : source->names()) {
    std::optional<Tensor> t = source->find(name);
    if (!t) throw Error(cat(source->describe(), ": lists tensor '", name, "' but cannot find it"));
    if (is_tied_copy(config, name, *t, *source)) continue;
    out.bytes += t->nbytes();
    out.tensors.emplace_back(name, std::move(*t));
  }
  return out;
}

// The model's parameters as loaded with its projections in `dtype`.
Converted model_tensors(const fs::path& src, DType dtype) {
  LanguageModel model = LanguageModel::load(src, LoadOptions{.weights = dtype});
  Converted out{.from = src.string()};
  model.for_each_param([&](const std::string& name, Param& p) {
    out.bytes += p.value.nbytes();
    out.tensors.emplace_back(name, p.value);
  });
  return out;
}

int run_convert(const ConvertArgs& a) {
  const fs::path src(a.src), dst(a.dst);
  if (fs::exists(dst / "model.safetensors") && !a.force)
    throw UsageError(cat("DST_DIR ", dst.string(), ": already holds model.safetensors (--force overwrites it)"));
  const Converted c = a.dtype == "keep" ? stored_tensors(src) : model_tensors(src, *weight_dtype(a.dtype));
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) throw Error(cat(dst.string(), ": cannot create directory: ", ec.message()));
  save_safetensors(dst / "model.safetensors", c.tensors, {{"format", "pt"}});
  for (const char* file : {"config.json", "tokenizer.json"}) {
    if (!fs::is_regular_file(src / file)) continue;
    const std::string text = read_file(src / file);
    write_file_atomically(dst / file, [&](FileWriter& w) { w.write(text); });
  }
  std::printf("%s -> %s: %zu tensors, %zu bytes\n", c.from.c_str(), (dst / "model.safetensors").c_str(),
              c.tensors.size(), c.bytes);
  return 0;
}

void setup_convert(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("convert", "write a model directory's weights as model.safetensors");
  static ConvertArgs args;
  cmd->add_option("SRC_DIR", args.src, "model directory (safetensors or pytorch_model.bin)")
      ->type_name("DIR")->required()->check(model_directory());
  cmd->add_option("DST_DIR", args.dst, "output directory, created if missing")
      ->type_name("DIR")->required()->check(output_directory());
  cmd->add_option("--dtype", args.dtype,
                  "projection weights written as: keep (every tensor as stored), f32, bf16 or f16 "
                  "(rounded to nearest; norms, conv and scan parameters written as F32)")
      ->type_name("TYPE")
      ->default_str("keep")
      ->check(one_of({"keep", "f32", "bf16", "f16"}));
  cmd->add_flag("--force", args.force, "overwrite a model.safetensors already in DST_DIR");
  cmd->callback([&action] { action = [] { return run_convert(args); }; });
}

}  // namespace

SSM_COMMAND(convert, setup_convert);

}  // namespace ssm::cli
