// One chosen expert's backward for one token, shared by the host backends'
// routed_experts_backward kernels (ref with Acc = double into buffers of
// its own, cpu with Acc = float straight into the gradients):
//   h = W1 x, act = SiLU(h_gate) * h_value  or  relu(h)^2,  o = W2 act
//   returns dweight = dout . o; dact = weight * W2^T dout
//   dW2 += weight * dout act^T, dW1 += dh x^T, dx += W1^T dh
#pragma once

#include <algorithm>
#include <vector>

#include "ops/moe_weights.h"
#include "ops/scalar_math.h"

namespace ssm::ops {

// Where one expert's gradients go: W1's row blocks and W2, laid out as the
// weights (null: not wanted).
template <typename Acc>
struct ExpertGrads {
  Acc* w1[2] = {nullptr, nullptr};
  Acc* w2 = nullptr;
};

template <typename Acc>
Acc expert_token_backward(const ExpertWeights& w, bool gated, int64_t F, int64_t D, const float* x,
                          Acc weight, const float* dout, const ExpertGrads<Acc>& g, Acc* dx,
                          std::vector<Acc>& h, std::vector<Acc>& act, std::vector<Acc>& dact) {
  const int64_t rows = gated ? 2 * F : F;
  h.resize(static_cast<size_t>(rows));
  act.resize(static_cast<size_t>(rows));
  dact.assign(static_cast<size_t>(F), Acc(0));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w.w1[r / F] + (r % F) * D;
    Acc acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += static_cast<Acc>(row[d]) * x[d];
    h[r] = acc;
  }
  for (int64_t f = 0; f < F; ++f) {
    const Acc p = std::max(Acc(0), h[f]);
    act[f] = gated ? silu(h[f]) * h[F + f] : p * p;
  }
  // dweight and dact = weight W2^T dout, one pass over W2.
  Acc dweight = 0;
  for (int64_t d = 0; d < D; ++d) {
    const float* row = w.w2 + d * F;
    Acc o = 0;
    const Acc dd = dout[d];
    for (int64_t f = 0; f < F; ++f) {
      o += static_cast<Acc>(row[f]) * act[f];
      dact[f] += weight * dd * row[f];
    }
    dweight += dd * o;
    if (g.w2)
      for (int64_t f = 0; f < F; ++f) g.w2[d * F + f] += weight * dd * act[f];
  }
  // dh into act (no longer needed): rows [0, F) the gate (or relu input), [F, 2F) the value.
  std::vector<Acc>& dh = act;
  for (int64_t f = 0; f < F; ++f) {
    const Acc hf = h[f];
    if (gated) {
      dh[F + f] = dact[f] * silu(hf);
      dh[f] = dact[f] * h[F + f] * silu_grad(hf);
    } else {
      dh[f] = dact[f] * Acc(2) * std::max(Acc(0), hf);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w.w1[r / F] + (r % F) * D;
    const Acc dr = dh[r];
    for (int64_t d = 0; d < D; ++d) dx[d] += dr * row[d];
    if (g.w1[r / F]) {
      Acc* grow = g.w1[r / F] + (r % F) * D;
      for (int64_t d = 0; d < D; ++d) grow[d] += dr * x[d];
    }
  }
  return dweight;
}

}  // namespace ssm::ops
