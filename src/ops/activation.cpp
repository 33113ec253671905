#include "ssm/ops/activation.h"

#include "ops/op_check.h"

namespace ssm::ops {

void relu_squared(Context& ctx, const Tensor& t) {
  const detail::OpCheck c(ctx, "relu_squared");
  c.rows("t", t);
  detail::run(ctx, c.kernel(&OpTable::relu_squared), t);
}

}  // namespace ssm::ops
