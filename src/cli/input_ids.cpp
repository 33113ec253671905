#include "cli/input_ids.h"

#include "cli/flags.h"
#include "ssm/io/safetensors.h"

namespace ssm::cli {

Tensor read_input_ids(const std::string& path, int64_t vocab_size) {
  const SafetensorsFile in = SafetensorsFile::open(path);
  if (!in.contains("input_ids")) throw Error(cat(path, ": no tensor named 'input_ids'"));
  const Tensor ids = in.get("input_ids");
  if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32)
    throw Error(cat(path, ": input_ids must be I64 or I32, got ", dtype_name(ids.dtype())));
  if (ids.ndim() != 2) throw Error(cat(path, ": input_ids must be (batch, length)"));
  if (ids.dim(0) == 0 || ids.dim(1) == 0)
    throw Error(cat(path, ": input_ids is (", ids.dim(0), ", ", ids.dim(1), "): there are no tokens"));
  Tensor out = ids.clone();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t id = out.dtype() == DType::kI64 ? out.data<int64_t>()[i] : out.data<int32_t>()[i];
    if (id < 0 || id >= vocab_size)
      throw Error(cat(path, ": input_ids[", i / out.dim(1), ", ", i % out.dim(1), "] = ", id,
                      " is outside the model's vocabulary [0, ", vocab_size, ")"));
  }
  return out;
}

void add_ids_to_file_options(CLI::App& cmd, IdsToFileArgs& args, const std::string& output_what, WeightUse use) {
  add_model_argument(cmd, args.model, "model directory", WithoutModel::builtin);
  cmd.add_option("--input", args.input, "safetensors file holding input_ids (batch, length)")
      ->type_name("FILE")->required()->check(input_file());
  cmd.add_option("--output", args.output, "safetensors file to write " + output_what + " to")
      ->type_name("FILE")->required()->check(output_file());
  add_compute_options(cmd, args.compute, use);
}

}  // namespace ssm::cli
