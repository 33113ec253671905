// ssm logits MODEL --input F --output F: input_ids (B, L) -> logits (B, L, V).
#include "cli/commands.h"
#include "cli/input_ids.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"

namespace ssm::cli {
namespace {

int run_logits(const IdsToFileArgs& a) {
  LanguageModel model = LanguageModel::load(a.model, load_options(a.compute));
  const Tensor ids = read_input_ids(a.input, model.config().vocab_size);
  Context ctx = make_context(a.compute);
  model.to_device(ctx.device());  // weights uploaded once (a no-op on the host)
  Tensor logits = model.forward(ids, nullptr, ctx);
  if (!logits.device().is_host()) logits = logits.to(Device::host());
  save_safetensors(a.output, {{"logits", logits}});
  return 0;
}

void setup_logits(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("logits", "compute logits of input_ids from a safetensors file");
  static IdsToFileArgs args;
  add_ids_to_file_options(*cmd, args, "logits");
  cmd->callback([&action] { action = [] { return run_logits(args); }; });
}

}  // namespace

SSM_COMMAND(logits, setup_logits);

}  // namespace ssm::cli
