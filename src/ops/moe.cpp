#include "ssm/ops/moe.h"

#include "ops/moe_weights.h"
#include "ops/op_check.h"

namespace ssm::ops {

void moe_route(Context& ctx, const MoeRouteArgs& a) {
  const detail::OpCheck c(ctx, "moe_route");
  c.rows("logits", a.logits);
  const int64_t T = a.logits.rows(), E = a.logits.cols();
  c.expect(a.k >= 1 && a.k <= E, "k must be in [1, experts]");
  c.optional("bias", a.bias, {E});
  c.expect(!a.bias.defined() || a.router == Router::kSigmoidBiased, "only the sigmoid router takes a bias");
  const bool grouped = a.n_group != 1 || a.topk_group != 1;
  c.expect(!grouped || a.router == Router::kSigmoidBiased, "only the sigmoid router chooses by groups");
  c.expect(a.n_group >= 1 && E % a.n_group == 0, "n_group must divide the expert count");
  c.expect(a.topk_group >= 1 && a.topk_group <= a.n_group, "topk_group must be in [1, n_group]");
  c.expect(!grouped || E / a.n_group >= 2, "groups must hold at least two experts (each is scored by its best two)");
  c.expect(a.topk_group * (E / a.n_group) >= a.k, "the topk_group groups must hold at least k experts");
  c.host("idx", a.idx, {T, a.k}, DType::kI64).rows("weights", a.weights, T, a.k);
  detail::run(ctx, c.kernel(&OpTable::moe_route), a);
}

void routed_experts(Context& ctx, const RoutedExpertsArgs& a) {
  const detail::OpCheck c(ctx, "routed_experts");
  c.rows("x", a.x);
  const int64_t T = a.x.rows(), D = a.x.cols();
  const bool gated = a.activation == ExpertActivation::kSiluGated;
  int64_t E = 0;
  if (per_expert_weights(a)) {
    c.expect(!a.w1.defined() && !a.w2.defined(), "give stacked w1/w2 or per-expert tensors, not both");
    E = static_cast<int64_t>(a.down.size());
    c.expect(a.up.size() == a.down.size() && (gated ? a.gate.size() == a.down.size() : a.gate.empty()),
             "per-expert tensors: up and down (and gate for the gated MLP, only then) for every expert");
    c.expect(a.down.front().defined() && a.down.front().ndim() == 2, "down tensors must be (D, F)");
    const int64_t F = a.down.front().dim(1);
    for (size_t e = 0; e < a.down.size(); ++e) {
      c.dense("down", a.down[e], {D, F}).dense("up", a.up[e], {F, D});
      if (gated) c.dense("gate", a.gate[e], {F, D});
    }
  } else {
    c.expect(a.gate.empty() && a.up.empty(), "per-expert tensors need down as well");
    c.expect(a.w1.defined() && a.w1.ndim() == 3 && a.w2.defined() && a.w2.ndim() == 3,
             "w1 and w2 must be (E, rows, cols)");
    E = a.w1.dim(0);
    const int64_t F = a.w2.dim(2);
    c.dense("w1", a.w1, {E, gated ? 2 * F : F, D}).dense("w2", a.w2, {E, D, F});
  }
  c.expect(a.idx.defined() && a.idx.ndim() == 2, "idx must be (T, k)");
  const int64_t k = a.idx.dim(1);
  c.host("idx", a.idx, {T, k}, DType::kI64).rows("weights", a.weights, T, k);
  const int64_t* idx = a.idx.data<int64_t>();
  for (int64_t i = 0; i < T * k; ++i) c.expect(idx[i] >= 0 && idx[i] < E, "idx holds an expert outside [0, E)");
  c.rows("out", a.out, T, D);
  detail::run(ctx, c.kernel(&OpTable::routed_experts), a);
}

}  // namespace ssm::ops
