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

}  // namespace ssm::ops
