#include "ssm/ops/activation.h"

#include "ops/op_check.h"

namespace ssm::ops {

void relu_squared(Context& ctx, const Tensor& t) {
  const detail::OpCheck c(ctx, "relu_squared");
  c.rows("t", t);
  detail::run(ctx, c.kernel(&OpTable::relu_squared), t);
}

void gelu_product(Context& ctx, const Tensor& gate, const Tensor& t) {
  const detail::OpCheck c(ctx, "gelu_product");
  c.rows("t", t).rows("gate", gate, t.rows(), t.cols());
  c.expect(gate.shape() == t.shape(), "gate and t of the same shape");
  detail::run(ctx, c.kernel(&OpTable::gelu_product), gate, t);
}

void relu_squared_backward(Context& ctx, const Tensor& x, const Tensor& d) {
  const detail::OpCheck c(ctx, "relu_squared_backward");
  c.rows("x", x).rows("d", d, x.rows(), x.cols());
  detail::run(ctx, c.kernel(&OpTable::relu_squared_backward), x, d);
}

void gelu_product_backward(Context& ctx, const Tensor& gate, const Tensor& t, const Tensor& dgate,
                           const Tensor& d) {
  const detail::OpCheck c(ctx, "gelu_product_backward");
  c.rows("t", t).rows("gate", gate, t.rows(), t.cols()).rows("dgate", dgate, t.rows(), t.cols());
  c.rows("d", d, t.rows(), t.cols());
  detail::run(ctx, c.kernel(&OpTable::gelu_product_backward), gate, t, dgate, d);
}

}  // namespace ssm::ops
