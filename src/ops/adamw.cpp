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

void adamw_slices(Context& ctx, const AdamWSlicesArgs& a) {
  const detail::OpCheck c(ctx, "adamw_slices");
  c.expect(a.slices >= 0 && a.elements >= 0, "slices and elements count from 0");
  c.dense("table", a.table, {a.slices * kAdamWSliceWords}, DType::kI64);
  c.optional("clip_sum_squares", a.clip_sum_squares, {1}, DType::kF64);
  c.expect(a.step >= 1, "step counts from 1");
  detail::run(ctx, c.kernel(&OpTable::adamw_slices), a);
}

bool has_adamw_slices(Context& ctx) { return ctx.backend().ops().adamw_slices != nullptr; }

}  // namespace ssm::ops
