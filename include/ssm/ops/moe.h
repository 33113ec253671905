// Mixture-of-experts MLPs in two ops (docs/MATH.md, "Mixture of experts"):
//   moe_route       router logits (T, E) -> for each token its k experts and
//                   their weights, by one of the routers the families use
//   routed_experts  out[t] = sum_j weight[t, j] * expert_{idx[t, j]}(x[t]),
//                   expert_e(x) = (act(x W1_e^T [gate]) * x W1_e^T [value]) W2_e^T
// Backends group the tokens by expert so that each expert's projections run
// as one matrix product over its tokens; every token's k contributions are
// summed in the order j = 0..k-1, so the result does not depend on that
// grouping or on the thread count.
#pragma once

#include <span>

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

enum class Router {
  // softmax over the k largest logits only (Granite)
  kTopkSoftmax,
  // softmax over all E logits, then the k largest probabilities, kept as
  // they are (Jamba; Mixtral-like without renormalisation)
  kSoftmaxTopk,
  // sigmoid scores; experts chosen by score + bias; weights are the chosen
  // scores, normalised to sum 1 when `normalize`, times `scale` (Nemotron-H)
  kSigmoidBiased,
};

struct MoeRouteArgs {
  Router router = Router::kTopkSoftmax;
  int64_t k = 1;
  Tensor logits;  // (T, E) rows
  Tensor bias;    // (E): kSigmoidBiased's selection bias, or undefined
  bool normalize = true;
  float scale = 1.f;
  // kSigmoidBiased's group-limited choice (DeepSeek-V3 style, Nemotron-H's
  // n_group / topk_group): the E experts form n_group equal groups, each
  // scored by the sum of its two best biased scores; only the topk_group
  // best groups' experts may be chosen. 1 and 1: no restriction.
  int64_t n_group = 1, topk_group = 1;
  Tensor idx;      // (T, k) I64, host, dense: written, by decreasing selection score
  Tensor weights;  // (T, k) F32 rows, written
};
void moe_route(Context& ctx, const MoeRouteArgs& a);

enum class ExpertActivation {
  kSiluGated,  // act(first half) * second half of W1's output (Granite, Jamba)
  kRelu2,      // relu(x W1^T)^2, W1 of F rows, no gate (Nemotron-H)
};

struct RoutedExpertsArgs {
  ExpertActivation activation = ExpertActivation::kSiluGated;
  Tensor x;        // (T, D) rows
  Tensor idx;      // (T, k) I64 host dense, from moe_route
  Tensor weights;  // (T, k) F32 rows
  Tensor w1;       // (E, 2F, D) dense for kSiluGated, (E, F, D) for kRelu2
  Tensor w2;       // (E, D, F) dense
  // Or, instead of w1 and w2, each expert's projections as tensors of their
  // own, as HF's Jamba and Nemotron-H checkpoints store them (E of each,
  // dense F32): gate (F, D) for kSiluGated only, up (F, D), down (D, F).
  // Expert e's W1 is then [gate_e | up_e] (kSiluGated) or up_e (kRelu2).
  std::span<const Tensor> gate, up, down;
  Tensor out;      // (T, D) rows, written (or added to when accumulate)
  bool accumulate = false;
};
void routed_experts(Context& ctx, const RoutedExpertsArgs& a);

}  // namespace ssm::ops

namespace ssm::ops {

// The backward of moe_route: the gradient of the weights to that of the
// logits (the choice itself, and the selection bias, have none):
//   kTopkSoftmax:   dl[c_j] = w_j (dw_j - sum_i w_i dw_i), 0 elsewhere
//   kSoftmaxTopk:   dl[e] = p_e (g_e - sum_j w_j dw_j), g_{c_j} = dw_j, else 0
//   kSigmoidBiased: ds[c_j] = scale (dw_j - sum_i dw_i s_i / S) / S with
//                   S = sum_i s_{c_i} (or scale dw_j unnormalised),
//                   dl = ds s (1 - s)
struct MoeRouteBackwardArgs {
  Router router = Router::kTopkSoftmax;
  bool normalize = true;
  float scale = 1.f;
  Tensor logits;    // (T, E) rows: the forward's
  Tensor idx;       // (T, k) I64 host dense: the forward's choice
  Tensor dweights;  // (T, k) rows
  Tensor dlogits;   // (T, E) rows, overwritten
};
void moe_route_backward(Context& ctx, const MoeRouteBackwardArgs& a);

// The backward of routed_experts (each chosen expert recomputed from x):
//   dweights[t, j] = dout[t] . expert_{idx[t, j]}(x[t])
//   dx[t] = sum_j weight[t, j] d expert(x[t]) / dx . dout[t], summed in j order
// and the experts' weight gradients added to dw1/dw2, or to dgate/dup/ddown
// (one per expert, as the forward's weights were given; all or none).
struct RoutedExpertsBackwardArgs {
  RoutedExpertsArgs fwd;  // out and accumulate unused
  Tensor dout;            // (T, D) rows
  Tensor dx;              // (T, D) rows, overwritten, or added to when accumulate_dx
  bool accumulate_dx = false;
  Tensor dweights;        // (T, k) rows, overwritten
  Tensor dw1, dw2;        // as w1, w2: accumulated; undefined: not wanted
  std::span<const Tensor> dgate, dup, ddown;  // as gate, up, down: accumulated; empty: not wanted
};
void routed_experts_backward(Context& ctx, const RoutedExpertsBackwardArgs& a);

}  // namespace ssm::ops
