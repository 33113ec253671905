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

}  // namespace ssm::ops
