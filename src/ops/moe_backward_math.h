// The MoE backward pieces the host backends share. One chosen expert's
// backward for one token, for the routed_experts_backward kernels (ref with
// Acc = double into buffers of its own, cpu with Acc = float straight into
// the gradients):
//   h = W1 x, act = SiLU(h_gate) * h_value  or  relu(h)^2,  o = W2 act
//   returns dweight = dout . o; dact = weight * W2^T dout
//   dW2 += weight * dout act^T, dW1 += dh x^T, dx += W1^T dh
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/moe_weights.h"
#include "ops/scalar_math.h"
#include "ssm/ops/moe.h"

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

// The gradient of one token's k weights to its logits (the header's rules),
// in Acc: dl (E) overwritten. Shared by the ref (Acc = double) and cpu
// (Acc = float) moe_route_backward kernels.
template <typename Acc, typename In>
void route_backward_row(const MoeRouteBackwardArgs& a, const In* logits, const int64_t* chosen,
                        const In* dw, int64_t E, int64_t k, Acc* dl, Acc* p) {
  std::fill(dl, dl + E, Acc(0));
  if (a.router == Router::kTopkSoftmax) {
    Acc mx = logits[chosen[0]], sum = 0, dot = 0;
    for (int64_t j = 1; j < k; ++j) mx = std::max<Acc>(mx, logits[chosen[j]]);
    for (int64_t j = 0; j < k; ++j) sum += p[j] = std::exp(static_cast<Acc>(logits[chosen[j]]) - mx);
    for (int64_t j = 0; j < k; ++j) dot += (p[j] /= sum) * dw[j];
    for (int64_t j = 0; j < k; ++j) dl[chosen[j]] += p[j] * (dw[j] - dot);
  } else if (a.router == Router::kSoftmaxTopk) {
    Acc mx = logits[0], sum = 0, dot = 0;
    for (int64_t e = 1; e < E; ++e) mx = std::max<Acc>(mx, logits[e]);
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<Acc>(logits[e]) - mx);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    for (int64_t j = 0; j < k; ++j) dot += p[chosen[j]] * dw[j];
    for (int64_t e = 0; e < E; ++e) dl[e] = -p[e] * dot;
    for (int64_t j = 0; j < k; ++j) dl[chosen[j]] += p[chosen[j]] * dw[j];
  } else {
    Acc S = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j) S += p[j] = sigmoid(static_cast<Acc>(logits[chosen[j]]));
    S += Acc(1e-20);
    for (int64_t j = 0; j < k; ++j) dot += dw[j] * p[j];
    for (int64_t j = 0; j < k; ++j) {
      const Acc ds = a.normalize ? a.scale * (dw[j] - dot / S) / S : a.scale * dw[j];
      dl[chosen[j]] += ds * p[j] * (Acc(1) - p[j]);
    }
  }
}

}  // namespace ssm::ops
