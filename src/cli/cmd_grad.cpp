// ssm grad MODEL --input F --output G: the next-token loss of the rows of
// input_ids and the gradient of every parameter, named as in the goldens'
// grads.safetensors (`loss`, `grad.NAME`).
#include "cli/commands.h"
#include "cli/input_ids.h"
#include "ssm/io/safetensors.h"
#include "ssm/train/model_grad.h"

namespace ssm::cli {
namespace {

int run_grad(const IdsToFileArgs& a) {
  require_f32_weights(a.compute, "ssm grad");
  LanguageModel model = LanguageModel::load(a.model, load_options(a.compute));
  const Tensor ids = read_input_ids(a.input, model.config().vocab_size);
  Context ctx = make_context(a.compute);
  Gradients grads(model, true);
  const LossSum loss = model_loss_and_grad(model, ids, &grads, 1.0, ctx);
  Tensor loss_t = Tensor::empty(DType::kF32, {1});
  loss_t.data<float>()[0] = static_cast<float>(loss.mean());
  NamedTensors out = {{"loss", loss_t}};
  for (size_t i = 0; i < grads.size(); ++i) out.emplace_back("grad." + grads.name(i), grads.grad(i));
  save_safetensors(a.output, out);
  return 0;
}

void setup_grad(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("grad", "write the loss of input_ids and every parameter's gradient");
  static IdsToFileArgs args;
  add_ids_to_file_options(*cmd, args, "loss and grad.NAME", WeightUse::kTraining);
  cmd->callback([&action] { action = [] { return run_grad(args); }; });
}

}  // namespace

SSM_COMMAND(grad, setup_grad);

}  // namespace ssm::cli
