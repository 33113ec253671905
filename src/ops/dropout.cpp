#include "ssm/ops/dropout.h"

#include "ops/op_check.h"

namespace ssm::ops {
namespace {

void check(const detail::OpCheck& c, const DropoutArgs& a) {
  c.rows("t", a.t);
  c.expect(a.p >= 0 && a.p < 1, "0 <= p < 1");
}

}  // namespace

void dropout(Context& ctx, const DropoutArgs& args) {
  const detail::OpCheck c(ctx, "dropout");
  check(c, args);
  detail::run(ctx, c.kernel(&OpTable::dropout), args);
}

void dropout_backward(Context& ctx, const DropoutArgs& args) {
  const detail::OpCheck c(ctx, "dropout_backward");
  check(c, args);
  detail::run(ctx, c.kernel(&OpTable::dropout_backward), args);
}

}  // namespace ssm::ops
