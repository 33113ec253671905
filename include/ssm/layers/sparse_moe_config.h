// The hyper-parameters of a mixture-of-experts MLP as HF's per-expert
// checkpoints hold it (include/ssm/layers/sparse_moe.h).
#pragma once

#include <cstdint>

namespace ssm {

struct SparseMoeConfig {
  // Nemotron-H: sigmoid router with a selection bias, relu² experts
  // (up/down) and a relu² shared expert. Jamba: softmax router over all
  // experts, SwiGLU experts (gate/up/down), no shared expert.
  enum class Style { kNemotronH, kJamba };
  Style style = Style::kJamba;
  int64_t d_model = 0;
  int64_t experts = 0;        // E
  int64_t top_k = 1;          // k
  int64_t expert_hidden = 0;  // F
  int64_t shared_hidden = 0;  // Nemotron-H's shared expert; 0: none
  // Nemotron-H's router: normalise the k chosen scores to sum 1, then
  // multiply by scale; choose within the topk_group best of n_group groups.
  bool normalize = true;
  float scale = 1.f;
  int64_t n_group = 1, topk_group = 1;
};

}  // namespace ssm
