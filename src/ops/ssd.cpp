#include "ssm/ops/ssd.h"

#include "ops/op_check.h"
#include "ops/state_dtype.h"

namespace ssm::ops {
namespace {

struct SsdShape {
  int64_t B, L, H, P, N, G;
};

SsdShape check_scan(const detail::OpCheck& c, const SsdScanArgs& a) {
  c.rows("x", a.x).expect(a.x.ndim() == 3, "x must be (B, L, H*P)");
  c.expect(a.A.defined() && a.A.ndim() == 1, "A must be (H)");
  SsdShape s{a.x.dim(0), a.x.dim(1), a.A.dim(0), 0, 0, a.groups};
  c.expect(s.H > 0 && a.x.cols() % s.H == 0, "x's width must be H*P");
  s.P = a.x.cols() / s.H;
  c.expect(s.G > 0 && s.H % s.G == 0, "groups must divide the heads");
  const int64_t rows = s.B * s.L;
  c.rows("B", a.B, rows, -1).expect(a.B.cols() % s.G == 0, "B's width must be G*N");
  s.N = a.B.cols() / s.G;
  c.rows("C", a.C, rows, s.G * s.N).rows("dt", a.dt, rows, s.H);
  c.dense("A", a.A, {s.H}).optional("D", a.D, {s.H});
  c.state("state", a.state, {s.B, s.H, s.P, s.N});
  c.expect(a.chunk > 0, "chunk must be positive");
  return s;
}

}  // namespace

void ssd_prepare(Context& ctx, const SsdPrepareArgs& a) {
  const detail::OpCheck c(ctx, "ssd_prepare");
  c.rows("dt_raw", a.dt_raw);
  const int64_t H = a.dt_raw.cols();
  c.dense("dt_bias", a.dt_bias, {H}).dense("A_log", a.A_log, {H});
  c.rows("dt", a.dt, a.dt_raw.rows(), H).dense("A", a.A, {H});
  detail::run(ctx, c.kernel(&OpTable::ssd_prepare), a);
}

void ssd_prepare_backward(Context& ctx, const SsdPrepareBackwardArgs& a) {
  const detail::OpCheck c(ctx, "ssd_prepare_backward");
  c.rows("dt_raw", a.dt_raw);
  const int64_t R = a.dt_raw.rows(), H = a.dt_raw.cols();
  c.dense("dt_bias", a.dt_bias, {H}).dense("A_log", a.A_log, {H});
  c.rows("ddt", a.ddt, R, H).dense("dA", a.dA, {H}).rows("ddt_raw", a.ddt_raw, R, H);
  c.optional("ddt_bias", a.ddt_bias, {H}).optional("dA_log", a.dA_log, {H});
  detail::run(ctx, c.kernel(&OpTable::ssd_prepare_backward), a);
}

void ssd_scan(Context& ctx, const SsdScanArgs& a) {
  const detail::OpCheck c(ctx, "ssd_scan");
  const SsdShape s = check_scan(c, a);
  c.rows("y", a.y, s.B * s.L, s.H * s.P);
  const auto kernel = c.kernel(&OpTable::ssd_scan);
  detail::run_with_f32_state(ctx, kernel, a, &SsdScanArgs::state, detail::bf16_state_native(ctx, s.L));
}

void ssd_scan_backward(Context& ctx, const SsdScanBackwardArgs& a) {
  const detail::OpCheck c(ctx, "ssd_scan_backward");
  const SsdShape s = check_scan(c, a.fwd);
  c.expect(!a.fwd.state.defined() || a.fwd.state.dtype() == DType::kF32,
           "the backward takes an F32 state (training starts fresh sequences)");
  const int64_t rows = s.B * s.L;
  c.rows("dy", a.dy, rows, s.H * s.P).rows("dx", a.dx, rows, s.H * s.P);
  c.rows("dB", a.dB, rows, s.G * s.N).rows("dC", a.dC, rows, s.G * s.N);
  c.rows("ddt", a.ddt, rows, s.H).dense("dA", a.dA, {s.H}).optional("dD", a.dD, {s.H});
  detail::run(ctx, c.kernel(&OpTable::ssd_scan_backward), a);
}

}  // namespace ssm::ops
