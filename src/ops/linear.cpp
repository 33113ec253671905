#include "ssm/ops/linear.h"

#include "ops/norm_linear_composed.h"
#include "ops/op_check.h"
#include "ssm/ops/rms_norm.h"

namespace ssm::ops {

void linear(Context& ctx, const LinearArgs& a) {
  const detail::OpCheck c(ctx, "linear");
  c.rows("x", a.x);
  c.expect(a.W.defined() && a.W.ndim() == 2 && a.W.is_dense(), "W must be a dense (N, K) matrix");
  const int64_t N = a.W.dim(0), K = a.W.dim(1), M = a.x.rows();
  c.expect(a.x.cols() == K, "x's width differs from W's input width");
  c.expect(a.W.dtype() == DType::kF32 || a.W.dtype() == DType::kF16 || a.W.dtype() == DType::kBF16 ||
               a.W.dtype() == DType::kQ8,
           "W must be F32, F16, BF16 or Q8");
  c.expect(a.W.device() == ctx.device(), "W is not on the backend's device");
  c.optional("bias", a.bias, {N});
  c.rows("y", a.y, M, N);
  detail::run(ctx, c.kernel(&OpTable::linear), a);
}

void norm_linear(Context& ctx, const NormLinearArgs& a) {
  const Kernel<NormLinearArgs> fused = ctx.backend().ops().norm_linear;
  // The composition itself: each op checks its own arguments.
  if (!fused) return detail::norm_linear_composed(ctx, a);
  const detail::OpCheck c(ctx, "norm_linear");
  c.rows("x", a.x);
  const int64_t M = a.x.rows(), K = a.x.cols();
  c.optional_rows("gate", a.gate, M, K).optional("norm_weight", a.norm_weight, {K});
  const int64_t g = a.group ? a.group : K;
  c.expect(g > 0 && K % g == 0, "group must divide the width");
  c.expect(a.W.defined() && a.W.ndim() == 2 && a.W.is_dense() && a.W.dim(1) == K,
           "W must be a dense (N, K) matrix of x's width");
  c.expect(a.W.dtype() == DType::kF32 || a.W.dtype() == DType::kF16 || a.W.dtype() == DType::kBF16 ||
               a.W.dtype() == DType::kQ8,
           "W must be F32, F16, BF16 or Q8");
  c.expect(a.W.device() == ctx.device(), "W is not on the backend's device");
  const int64_t N = a.W.dim(0);
  c.optional("bias", a.bias, {N}).rows("y", a.y, M, N);
  c.expect(a.y.raw() != a.x.raw() && (!a.gate.defined() || a.y.raw() != a.gate.raw()),
           "y may not alias x or gate");
  detail::run(ctx, fused, a);
}

namespace detail {

void norm_linear_composed(Context& ctx, const NormLinearArgs& a) {
  Arena::Scope scope(ctx.arena());
  const Tensor normed = ctx.arena().alloc(DType::kF32, {a.x.rows(), a.x.cols()});
  if (a.gate.defined())
    gated_rms_norm(ctx, {.y = a.x,
                         .z = a.gate,
                         .w = a.norm_weight,
                         .group = a.group,
                         .eps = a.eps,
                         .norm_before_gate = a.norm_before_gate,
                         .out = normed});
  else
    rms_norm(ctx, {.x = a.x, .w = a.norm_weight, .eps = a.eps, .out = normed});
  linear(ctx, {.x = normed, .W = a.W, .bias = a.bias, .y = a.y, .accumulate = a.accumulate});
}

}  // namespace detail

void linear_backward(Context& ctx, const LinearBackwardArgs& a) {
  const detail::OpCheck c(ctx, "linear_backward");
  c.expect(a.W.defined() && a.W.ndim() == 2, "W must be an (N, K) matrix");
  const int64_t N = a.W.dim(0), K = a.W.dim(1);
  c.dense("W", a.W, {N, K});
  c.rows("x", a.x, -1, K);
  const int64_t M = a.x.rows();
  c.rows("dy", a.dy, M, N);
  c.optional_rows("dx", a.dx, M, K);
  c.optional("dW", a.dW, {N, K});
  c.optional("dbias", a.dbias, {N});
  detail::run(ctx, c.kernel(&OpTable::linear_backward), a);
}

}  // namespace ssm::ops
