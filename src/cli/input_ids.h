// input_ids in a safetensors file: what `ssm logits`, `ssm grad` and
// `ssm score --input` read, and the options of the two commands that map
// such a file to another.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/compute_options.h"
#include "ssm/tensor/tensor.h"

namespace ssm::cli {

// The I64 or I32 (batch, length) tensor named input_ids, copied out of the
// mapping (aligned), with at least one token and every id in [0, vocab_size);
// ssm::Error naming path (and the bad id's place) otherwise.
Tensor read_input_ids(const std::string& path, int64_t vocab_size);

struct IdsToFileArgs {
  std::string model, input, output;
  ComputeOptions compute;
};

// MODEL, --input FILE, --output FILE (output_what: what it receives) and the
// compute options.
void add_ids_to_file_options(CLI::App& cmd, IdsToFileArgs& args, const std::string& output_what,
                             WeightUse use = WeightUse::kInference);

}  // namespace ssm::cli
