#include "ssm/ops/adamw.h"

#include "ops/op_check.h"

namespace ssm::ops {

void adamw(Context& ctx, const AdamWArgs& a) {
  const detail::OpCheck c(ctx, "adamw");
  c.expect(a.param.defined() && a.param.is_dense(), "param must be dense");
  const Shape n{a.param.numel()};
  c.dense("param", a.param.reshape(n), n).dense("grad", a.grad.reshape(n), n);
  c.dense("m", a.m.reshape(n), n).dense("v", a.v.reshape(n), n);
  c.expect(a.step >= 1, "step counts from 1");
  detail::run(ctx, c.kernel(&OpTable::adamw), a);
}

}  // namespace ssm::ops
