#include "ssm/ops/linear.h"

#include "ops/op_check.h"

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
