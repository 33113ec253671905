#include "ssm/ops/selective_scan.h"

#include "ops/op_check.h"

namespace ssm::ops {

void selective_scan(Context& ctx, const SelectiveScanArgs& a) {
  const detail::OpCheck c(ctx, "selective_scan");
  c.rows("x", a.x).expect(a.x.ndim() == 3, "x must be (B, L, D)");
  const int64_t Bn = a.x.dim(0), D = a.x.cols(), rows = Bn * a.x.dim(1);
  c.expect(a.A_log.defined() && a.A_log.ndim() == 2, "A_log must be (D, N)");
  const int64_t N = a.A_log.dim(1);
  c.dense("A_log", a.A_log, {D, N});
  c.rows("dt_raw", a.dt_raw, rows, D).optional("dt_bias", a.dt_bias, {D});
  c.rows("B", a.B, rows, N).rows("C", a.C, rows, N).optional("D", a.D, {D});
  c.optional_rows("z", a.z, rows, D);
  c.rows("y", a.y, rows, D);
  c.expect(a.y.raw() != a.x.raw() && a.y.raw() != a.dt_raw.raw(), "y may not alias x or dt_raw");
  c.optional("state", a.state, {Bn, D, N});
  detail::run(ctx, c.kernel(&OpTable::selective_scan), a);
}

void selective_scan_backward(Context& ctx, const SelectiveScanBackwardArgs& a) {
  const detail::OpCheck c(ctx, "selective_scan_backward");
  const SelectiveScanArgs& f = a.fwd;
  c.rows("x", f.x).expect(f.x.ndim() == 3, "x must be (B, L, D)");
  const int64_t Bn = f.x.dim(0), D = f.x.cols(), rows = Bn * f.x.dim(1);
  c.expect(f.A_log.defined() && f.A_log.ndim() == 2, "A_log must be (D, N)");
  const int64_t N = f.A_log.dim(1);
  c.dense("A_log", f.A_log, {D, N});
  c.rows("dt_raw", f.dt_raw, rows, D).optional("dt_bias", f.dt_bias, {D});
  c.rows("B", f.B, rows, N).rows("C", f.C, rows, N).optional("D", f.D, {D});
  c.optional_rows("z", f.z, rows, D).optional("state", f.state, {Bn, D, N});
  c.rows("dy", a.dy, rows, D).rows("dx", a.dx, rows, D).rows("ddt_raw", a.ddt_raw, rows, D);
  c.rows("dB", a.dB, rows, N).rows("dC", a.dC, rows, N).optional_rows("dz", a.dz, rows, D);
  c.expect(a.dz.defined() == f.z.defined(), "dz is wanted exactly when there is a gate z");
  c.optional("ddt_bias", a.ddt_bias, {D}).optional("dA_log", a.dA_log, {D, N});
  c.optional("dD", a.dD, {D});
  detail::run(ctx, c.kernel(&OpTable::selective_scan_backward), a);
}

}  // namespace ssm::ops
