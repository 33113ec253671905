// ssm logits MODEL --input F --output F: input_ids (B, L) -> logits (B, L, V).
#include "cli/commands.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"

namespace ssm::cli {
namespace {

struct LogitsArgs {
  std::string model, input, output;
  int threads = 1;
};

int run_logits(const LogitsArgs& a) {
  LanguageModel model = LanguageModel::load(a.model, load_options());
  const SafetensorsFile in = SafetensorsFile::open(a.input);
  if (!in.contains("input_ids")) throw Error(cat(a.input, ": no tensor named 'input_ids'"));
  Tensor ids = in.get("input_ids");
  if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32)
    throw Error(cat(a.input, ": input_ids must be I64 or I32, got ", dtype_name(ids.dtype())));
  if (ids.ndim() != 2) throw Error(cat(a.input, ": input_ids must be (batch, length)"));
  ids = ids.clone();  // aligned copy of the mapped bytes
  Context ctx(a.threads);
  const Tensor logits = model.forward(ids, nullptr, ctx);
  save_safetensors(a.output, {{"logits", logits}});
  return 0;
}

void setup_logits(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("logits", "compute logits of input_ids from a safetensors file");
  static LogitsArgs args;
  cmd->add_option("MODEL", args.model, "model directory")->required();
  cmd->add_option("--input", args.input, "safetensors file holding input_ids (batch, length)")->required();
  cmd->add_option("--output", args.output, "safetensors file to write logits to")->required();
  add_threads_option(*cmd, args.threads);
  add_max_memory_option(*cmd);
  cmd->callback([&action] { action = [] { return run_logits(args); }; });
}

}  // namespace

SSM_COMMAND(logits, setup_logits);

}  // namespace ssm::cli
