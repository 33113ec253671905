#include "ssm/ops/conv1d.h"

#include "ops/op_check.h"

namespace ssm::ops {
namespace {

// (B, L, C) from in; K from the weight.
struct ConvShape {
  int64_t B, L, C, K;
};

ConvShape check_common(const detail::OpCheck& c, const Tensor& in, const Tensor& weight,
                       const Tensor& bias) {
  c.rows("in", in).expect(in.ndim() == 3, "in must be (B, L, C)");
  c.expect(weight.defined() && weight.ndim() == 3, "weight must be (C, 1, K)");
  const ConvShape s{in.dim(0), in.dim(1), in.dim(2), weight.dim(2)};
  c.dense("weight", weight, {s.C, 1, s.K});
  c.optional("bias", bias, {s.C});
  c.expect(s.K >= 1, "kernel width must be at least 1");
  return s;
}

}  // namespace

void conv1d(Context& ctx, const Conv1dArgs& a) {
  const detail::OpCheck c(ctx, "conv1d");
  const ConvShape s = check_common(c, a.in, a.weight, a.bias);
  c.optional("state", a.state, {s.B, s.K - 1, s.C});
  c.rows("out", a.out, s.B * s.L, s.C).expect(a.out.ndim() == 3, "out must be (B, L, C)");
  detail::run(ctx, c.kernel(&OpTable::conv1d), a);
}

void conv1d_backward(Context& ctx, const Conv1dBackwardArgs& a) {
  const detail::OpCheck c(ctx, "conv1d_backward");
  const ConvShape s = check_common(c, a.in, a.weight, a.bias);
  c.rows("dout", a.dout, s.B * s.L, s.C).expect(a.dout.ndim() == 3, "dout must be (B, L, C)");
  c.rows("din", a.din, s.B * s.L, s.C).expect(a.din.ndim() == 3, "din must be (B, L, C)");
  c.optional("dweight", a.dweight, {s.C, 1, s.K});
  c.optional("dbias", a.dbias, {s.C});
  detail::run(ctx, c.kernel(&OpTable::conv1d_backward), a);
}

}  // namespace ssm::ops
