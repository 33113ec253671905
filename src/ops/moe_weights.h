// Where expert e's projections live for routed_experts, whichever way the
// caller gave them (stacked w1/w2, or one tensor per expert and role): W1's
// rows as one or two row blocks (gate then value for the gated MLP), W2 as
// one (D, F) block. Shared by every host backend's kernel.
#pragma once

#include "ssm/ops/moe.h"

namespace ssm::ops {

struct ExpertWeights {
  const float* w1[2] = {nullptr, nullptr};  // blocks of F rows each (one or two)
  int64_t w1_blocks = 1;
  const float* w2 = nullptr;  // (D, F)
};

inline bool per_expert_weights(const RoutedExpertsArgs& a) { return !a.down.empty(); }

inline int64_t expert_count(const RoutedExpertsArgs& a) {
  return per_expert_weights(a) ? static_cast<int64_t>(a.down.size()) : a.w1.dim(0);
}

inline int64_t expert_hidden(const RoutedExpertsArgs& a) {
  return per_expert_weights(a) ? a.down.front().dim(1) : a.w2.dim(2);
}

inline ExpertWeights expert_weights(const RoutedExpertsArgs& a, int64_t e, int64_t F, int64_t D) {
  const bool gated = a.activation == ExpertActivation::kSiluGated;
  ExpertWeights w;
  w.w1_blocks = gated ? 2 : 1;
  if (per_expert_weights(a)) {
    const auto i = static_cast<size_t>(e);
    if (gated) {
      w.w1[0] = a.gate[i].data<float>();
      w.w1[1] = a.up[i].data<float>();
    } else {
      w.w1[0] = a.up[i].data<float>();
    }
    w.w2 = a.down[i].data<float>();
    return w;
  }
  const int64_t rows = w.w1_blocks * F;
  const float* w1 = a.w1.data<float>() + e * rows * D;
  w.w1[0] = w1;
  w.w1[1] = w1 + F * D;
  w.w2 = a.w2.data<float>() + e * D * F;
  return w;
}

}  // namespace ssm::ops
