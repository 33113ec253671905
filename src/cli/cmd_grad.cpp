// ssm grad MODEL --input F --output G: the next-token loss of the rows of
// input_ids and the gradient of every parameter, named as in the goldens'
// grads.safetensors (`loss`, `grad.NAME`).
#include "cli/commands.h"
#include "ssm/io/safetensors.h"
#include "ssm/train/model_grad.h"

namespace ssm::cli {
namespace {

struct GradArgs {
  std::string model, input, output;
  int threads = 1;
};

int run_grad(const GradArgs& a) {
  LanguageModel model = LanguageModel::load(a.model, load_options());
  const SafetensorsFile in = SafetensorsFile::open(a.input);
  if (!in.contains("input_ids")) throw Error(cat(a.input, ": no tensor named 'input_ids'"));
  const Tensor ids = in.get("input_ids").clone();
  Context ctx(a.threads);
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
  static GradArgs args;
  cmd->add_option("MODEL", args.model, "model directory")->required();
  cmd->add_option("--input", args.input, "safetensors file holding input_ids (batch, length)")->required();
  cmd->add_option("--output", args.output, "safetensors file to write loss and grad.NAME to")->required();
  add_threads_option(*cmd, args.threads);
  add_max_memory_option(*cmd);
  cmd->callback([&action] { action = [] { return run_grad(args); }; });
}

}  // namespace

SSM_COMMAND(grad, setup_grad);

}  // namespace ssm::cli
