// The HF families of tests/golden/models (transformers' tiny model of each
// class, as published), by directory name: what the per-family training
// and gradient tests run over, on the CPU and on the GPU alike.
#pragma once

#include <string>
#include <vector>

namespace ssm::testing {

inline const std::vector<std::string>& hf_families() {
  static const std::vector<std::string> names = {
      "mamba1_hf",    "falcon_mamba_hf", "granite_hybrid_hf", "nemotron_h_hf", "nemotron_h_moe_hf",
      "falcon_h1_hf", "bamba_hf",        "jamba_hf",          "zamba2_hf"};
  return names;
}

}  // namespace ssm::testing
