#include "ssm/ops/rms_norm.h"

#include "ops/op_check.h"

namespace ssm::ops {

void rms_norm(Context& ctx, const RmsNormArgs& a) {
  const detail::OpCheck c(ctx, "rms_norm");
  c.rows("x", a.x);
  c.optional("w", a.w, {a.x.cols()});
  c.rows("out", a.out, a.x.rows(), a.x.cols());
  detail::run(ctx, c.kernel(&OpTable::rms_norm), a);
}

void rms_norm_backward(Context& ctx, const RmsNormBackwardArgs& a) {
  const detail::OpCheck c(ctx, "rms_norm_backward");
  c.rows("x", a.x);
  const int64_t R = a.x.rows(), D = a.x.cols();
  c.dense("w", a.w, {D});
  c.rows("dout", a.dout, R, D).rows("dx", a.dx, R, D);
  c.expect(a.dx.raw() != a.x.raw() && a.dx.raw() != a.dout.raw(), "dx may not alias x or dout");
  c.optional("dw", a.dw, {D});
  detail::run(ctx, c.kernel(&OpTable::rms_norm_backward), a);
}

namespace {

int64_t check_gate(const detail::OpCheck& c, const Tensor& y, const Tensor& z, const Tensor& w,
                   int64_t group) {
  c.rows("y", y);
  const int64_t R = y.rows(), D = y.cols();
  c.rows("z", z, R, D).optional("w", w, {D});
  const int64_t g = group ? group : D;
  c.expect(g > 0 && D % g == 0, "group must divide the width");
  return R;
}

}  // namespace

void gated_rms_norm(Context& ctx, const GatedRmsNormArgs& a) {
  const detail::OpCheck c(ctx, "gated_rms_norm");
  const int64_t R = check_gate(c, a.y, a.z, a.w, a.group);
  c.rows("out", a.out, R, a.y.cols());
  detail::run(ctx, c.kernel(&OpTable::gated_rms_norm), a);
}

void gated_rms_norm_backward(Context& ctx, const GatedRmsNormBackwardArgs& a) {
  const detail::OpCheck c(ctx, "gated_rms_norm_backward");
  const int64_t R = check_gate(c, a.y, a.z, a.w, a.group), D = a.y.cols();
  c.rows("dout", a.dout, R, D).rows("dy", a.dy, R, D).rows("dz", a.dz, R, D);
  c.optional("dw", a.dw, {D});
  detail::run(ctx, c.kernel(&OpTable::gated_rms_norm_backward), a);
}

}  // namespace ssm::ops
