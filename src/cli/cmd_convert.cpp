// ssm convert SRC_DIR DST_DIR: any checkpoint open_checkpoint reads (single
// or sharded safetensors, pytorch_model.bin, sharded .bin) -> DST_DIR with
// model.safetensors (dtypes kept), config.json and tokenizer.json if present.
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/checkpoint.h"
#include "ssm/io/safetensors.h"

namespace ssm::cli {
namespace {

struct ConvertArgs {
  std::string src, dst;
};

int run_convert(const ConvertArgs& a) {
  namespace fs = std::filesystem;
  const fs::path src(a.src), dst(a.dst);
  if (!fs::is_regular_file(src / "config.json"))
    throw Error(cat(src.string(), ": no config.json (not a model directory)"));
  const std::unique_ptr<TensorSource> source = open_checkpoint(src);
  NamedTensors tensors;
  size_t bytes = 0;
  for (const std::string& name : source->names()) {
    std::optional<Tensor> t = source->find(name);
    if (!t) throw Error(cat(source->describe(), ": lists tensor '", name, "' but cannot find it"));
    bytes += t->nbytes();
    // Tensors sharing a storage (a tied lm_head.weight) are written once each:
    // safetensors has no aliasing, and readers expect every listed name.
    tensors.emplace_back(name, std::move(*t));
  }
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) throw Error(cat(dst.string(), ": cannot create directory: ", ec.message()));
  save_safetensors(dst / "model.safetensors", tensors, {{"format", "pt"}});
  for (const char* file : {"config.json", "tokenizer.json"}) {
    if (!fs::is_regular_file(src / file)) continue;
    const std::string text = read_file(src / file);
    write_file_atomically(dst / file, [&](FileWriter& w) { w.write(text); });
  }
  std::printf("%s -> %s: %zu tensors, %zu bytes\n", source->describe().c_str(),
              (dst / "model.safetensors").c_str(), tensors.size(), bytes);
  return 0;
}

void setup_convert(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("convert", "write a model directory's weights as model.safetensors");
  static ConvertArgs args;
  cmd->add_option("SRC_DIR", args.src, "model directory (safetensors or pytorch_model.bin)")
      ->required();
  cmd->add_option("DST_DIR", args.dst, "output directory, created if missing")->required();
  cmd->callback([&action] { action = [] { return run_convert(args); }; });
}

}  // namespace

SSM_COMMAND(convert, setup_convert);

}  // namespace ssm::cli
