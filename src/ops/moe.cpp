#include "ssm/ops/moe.h"

#include "ops/op_check.h"

namespace ssm::ops {

void moe_route(Context& ctx, const MoeRouteArgs& a) {
  const detail::OpCheck c(ctx, "moe_route");
  c.rows("logits", a.logits);
  const int64_t T = a.logits.rows(), E = a.logits.cols();
  c.expect(a.k >= 1 && a.k <= E, "k must be in [1, experts]");
  c.optional("bias", a.bias, {E});
  c.expect(!a.bias.defined() || a.router == Router::kSigmoidBiased, "only the sigmoid router takes a bias");
  c.host("idx", a.idx, {T, a.k}, DType::kI64).rows("weights", a.weights, T, a.k);
  detail::run(ctx, c.kernel(&OpTable::moe_route), a);
}

void routed_experts(Context& ctx, const RoutedExpertsArgs& a) {
  const detail::OpCheck c(ctx, "routed_experts");
  c.rows("x", a.x);
  const int64_t T = a.x.rows(), D = a.x.cols();
  c.expect(a.w1.defined() && a.w1.ndim() == 3 && a.w2.defined() && a.w2.ndim() == 3,
           "w1 and w2 must be (E, rows, cols)");
  const int64_t E = a.w1.dim(0), F = a.w2.dim(2);
  const int64_t w1_rows = a.activation == ExpertActivation::kSiluGated ? 2 * F : F;
  c.dense("w1", a.w1, {E, w1_rows, D}).dense("w2", a.w2, {E, D, F});
  c.expect(a.idx.defined() && a.idx.ndim() == 2, "idx must be (T, k)");
  const int64_t k = a.idx.dim(1);
  c.host("idx", a.idx, {T, k}, DType::kI64).rows("weights", a.weights, T, k);
  const int64_t* idx = a.idx.data<int64_t>();
  for (int64_t i = 0; i < T * k; ++i) c.expect(idx[i] >= 0 && idx[i] < E, "idx holds an expert outside [0, E)");
  c.rows("out", a.out, T, D);
  detail::run(ctx, c.kernel(&OpTable::routed_experts), a);
}

}  // namespace ssm::ops
