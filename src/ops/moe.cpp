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

namespace {

// The forward's arguments of routed_experts, but out, as both ops check them.
void check_experts(const detail::OpCheck& c, const RoutedExpertsArgs& a) {
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
}

}  // namespace

void routed_experts(Context& ctx, const RoutedExpertsArgs& a) {
  const detail::OpCheck c(ctx, "routed_experts");
  check_experts(c, a);
  c.rows("out", a.out, a.x.rows(), a.x.cols());
  detail::run(ctx, c.kernel(&OpTable::routed_experts), a);
}

void moe_route_backward(Context& ctx, const MoeRouteBackwardArgs& a) {
  const detail::OpCheck c(ctx, "moe_route_backward");
  c.rows("logits", a.logits);
  const int64_t T = a.logits.rows(), E = a.logits.cols();
  c.expect(a.idx.defined() && a.idx.ndim() == 2 && a.idx.dim(1) >= 1 && a.idx.dim(1) <= E,
           "idx must be (T, k), k in [1, experts]");
  const int64_t k = a.idx.dim(1);
  c.host("idx", a.idx, {T, k}, DType::kI64).rows("dweights", a.dweights, T, k);
  c.rows("dlogits", a.dlogits, T, E);
  const int64_t* idx = a.idx.data<int64_t>();
  for (int64_t i = 0; i < T * k; ++i) c.expect(idx[i] >= 0 && idx[i] < E, "idx holds an expert outside [0, E)");
  detail::run(ctx, c.kernel(&OpTable::moe_route_backward), a);
}

void routed_experts_backward(Context& ctx, const RoutedExpertsBackwardArgs& a) {
  const detail::OpCheck c(ctx, "routed_experts_backward");
  const RoutedExpertsArgs& f = a.fwd;
  check_experts(c, f);
  const int64_t T = f.x.rows(), D = f.x.cols(), k = f.idx.dim(1);
  c.rows("dout", a.dout, T, D).rows("dx", a.dx, T, D).rows("dweights", a.dweights, T, k);
  if (per_expert_weights(f)) {
    c.expect(!a.dw1.defined() && !a.dw2.defined(), "per-expert weights take per-expert gradients");
    const bool any = !a.dup.empty() || !a.ddown.empty() || !a.dgate.empty();
    c.expect(!any || (a.dup.size() == f.up.size() && a.ddown.size() == f.down.size() &&
                      a.dgate.size() == f.gate.size()),
             "per-expert gradients: one for every weight, or none");
    for (size_t e = 0; any && e < f.down.size(); ++e) {
      c.dense("ddown", a.ddown[e], f.down[e].shape()).dense("dup", a.dup[e], f.up[e].shape());
      if (!f.gate.empty()) c.dense("dgate", a.dgate[e], f.gate[e].shape());
    }
  } else {
    c.expect(a.dgate.empty() && a.dup.empty() && a.ddown.empty(), "stacked weights take stacked gradients");
    c.expect(a.dw1.defined() == a.dw2.defined(), "dw1 and dw2 both, or neither");
    c.optional("dw1", a.dw1, f.w1.shape()).optional("dw2", a.dw2, f.w2.shape());
  }
  detail::run(ctx, c.kernel(&OpTable::routed_experts_backward), a);
}

}  // namespace ssm::ops
