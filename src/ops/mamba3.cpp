#include "ssm/ops/mamba3.h"

#include "ops/op_check.h"
#include "ops/state_dtype.h"

namespace ssm::ops {
namespace {

struct M3Shape {
  int64_t B, L, H, P, N, G, R, S;
};

M3Shape check_prepare(const detail::OpCheck& c, const Mamba3PrepareArgs& a) {
  c.rows("x", a.x).expect(a.x.ndim() == 3, "x must be (B, L, H*P)");
  M3Shape s{a.x.dim(0), a.x.dim(1), a.heads, 0, 0, a.groups, a.rank, 0};
  c.expect(s.H > 0 && a.x.cols() % s.H == 0, "x's width must be H*P");
  c.expect(s.G > 0 && s.H % s.G == 0 && s.R > 0, "groups must divide the heads; rank >= 1");
  s.P = a.x.cols() / s.H;
  const int64_t rows = s.B * s.L;
  c.rows("B", a.B, rows, -1).expect(a.B.cols() % (s.R * s.G) == 0, "B's width must be R*G*N");
  s.N = a.B.cols() / (s.R * s.G);
  c.rows("ang", a.ang, rows, -1);
  s.S = a.ang.cols();
  c.expect(2 * s.S <= s.N, "more rotary angles than pairs of state entries");
  const int64_t RGN = s.R * s.G * s.N;
  c.rows("C", a.C, rows, RGN).rows("ddt", a.ddt, rows, s.H).rows("ddA", a.ddA, rows, s.H);
  c.rows("trap", a.trap, rows, s.H);
  c.dense("dt_bias", a.dt_bias, {s.H}).dense("B_norm", a.B_norm, {s.N}).dense("C_norm", a.C_norm, {s.N});
  c.dense("B_bias", a.B_bias, {s.H, s.R, s.N}).dense("C_bias", a.C_bias, {s.H, s.R, s.N});
  c.optional("mimo_x", a.mimo_x, {s.H, s.R, s.P});
  c.dense("phase", a.phase, {s.B, s.H, s.S});
  c.dense("B_normed", a.B_normed, {s.B, s.L, RGN}).dense("C_normed", a.C_normed, {s.B, s.L, RGN});
  c.dense("ang_rate", a.ang_rate, {s.B, s.L, s.S});
  for (const Tensor* t : {&a.dt, &a.A, &a.lam}) c.dense("dt/A/lam", *t, {s.B, s.H, s.L});
  c.dense("q", a.q, {s.B, s.H, s.L, s.R, s.N}).dense("k", a.k, {s.B, s.H, s.L, s.R, s.N});
  c.dense("v", a.v, {s.B, s.H, s.L, s.R, s.P});
  c.optional("phases", a.phases, {s.B, s.H, s.L, s.S});
  return s;
}

M3Shape check_scan(const detail::OpCheck& c, const Mamba3ScanArgs& a) {
  c.expect(a.q.defined() && a.q.ndim() == 5 && a.v.defined() && a.v.ndim() == 5,
           "q and v must be (B, H, L, R, .)");
  const M3Shape s{a.q.dim(0), a.q.dim(2), a.q.dim(1), a.v.dim(4), a.q.dim(4), 1, a.q.dim(3), 0};
  c.dense("q", a.q, {s.B, s.H, s.L, s.R, s.N}).dense("k", a.k, {s.B, s.H, s.L, s.R, s.N});
  c.dense("v", a.v, {s.B, s.H, s.L, s.R, s.P});
  for (const Tensor* t : {&a.dt, &a.A, &a.lam}) c.dense("dt/A/lam", *t, {s.B, s.H, s.L});
  c.optional("D", a.D, {s.H});
  c.expect(a.ssm.defined() == a.k_prev.defined() && a.ssm.defined() == a.v_prev.defined(),
           "ssm, k_prev and v_prev come together");
  c.state("ssm", a.ssm, {s.B, s.H, s.P, s.N}).optional("k_prev", a.k_prev, {s.B, s.H, s.R, s.N});
  c.optional("v_prev", a.v_prev, {s.B, s.H, s.R, s.P});
  c.expect(a.chunk > 0, "chunk must be positive");
  return s;
}

M3Shape check_output(const detail::OpCheck& c, const Mamba3OutputArgs& a) {
  c.expect(a.o.defined() && a.o.ndim() == 5 && a.o.dim(3) == a.rank, "o must be (B, H, L, R, P)");
  const M3Shape s{a.o.dim(0), a.o.dim(2), a.o.dim(1), a.o.dim(4), 0, 1, a.rank, 0};
  c.dense("o", a.o, {s.B, s.H, s.L, s.R, s.P});
  c.rows("z", a.z, s.B * s.L, s.H * s.P);
  c.optional("mimo_z", a.mimo_z, {s.H, s.R, s.P}).optional("mimo_o", a.mimo_o, {s.H, s.R, s.P});
  c.optional("norm", a.norm, {s.H * s.P});
  return s;
}

}  // namespace

void mamba3_prepare(Context& ctx, const Mamba3PrepareArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_prepare");
  check_prepare(c, a);
  detail::run(ctx, c.kernel(&OpTable::mamba3_prepare), a);
}

void mamba3_prepare_backward(Context& ctx, const Mamba3PrepareBackwardArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_prepare_backward");
  const M3Shape s = check_prepare(c, a.fwd);
  c.expect(a.fwd.phases.defined(), "the forward must have kept its phases");
  c.dense("dq", a.dq, a.fwd.q.shape()).dense("dk", a.dk, a.fwd.k.shape()).dense("dv", a.dv, a.fwd.v.shape());
  for (const Tensor* t : {&a.ddt, &a.dA, &a.dlam}) c.dense("ddt/dA/dlam", *t, {s.B, s.H, s.L});
  const int64_t rows = s.B * s.L, RGN = s.R * s.G * s.N;
  c.rows("dx", a.dx, rows, s.H * s.P).rows("dB", a.dB, rows, RGN).rows("dC", a.dC, rows, RGN);
  c.rows("dddt", a.dddt, rows, s.H).rows("dddA", a.dddA, rows, s.H).rows("dtrap", a.dtrap, rows, s.H);
  c.rows("dang", a.dang, rows, s.S);
  c.optional("ddt_bias", a.ddt_bias, {s.H}).optional("dB_norm", a.dB_norm, {s.N});
  c.optional("dC_norm", a.dC_norm, {s.N}).optional("dB_bias", a.dB_bias, {s.H, s.R, s.N});
  c.optional("dC_bias", a.dC_bias, {s.H, s.R, s.N}).optional("dmimo_x", a.dmimo_x, {s.H, s.R, s.P});
  detail::run(ctx, c.kernel(&OpTable::mamba3_prepare_backward), a);
}

void mamba3_scan(Context& ctx, const Mamba3ScanArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_scan");
  const M3Shape s = check_scan(c, a);
  c.dense("o", a.o, {s.B, s.H, s.L, s.R, s.P});
  const auto kernel = c.kernel(&OpTable::mamba3_scan);
  detail::run_with_f32_state(ctx, kernel, a, &Mamba3ScanArgs::ssm, detail::bf16_state_native(ctx, s.L));
}

void mamba3_prepare_scan(Context& ctx, const Mamba3PrepareScanArgs& a) {
  const Kernel<Mamba3PrepareScanArgs> fused = ctx.backend().ops().mamba3_prepare_scan;
  if (!fused) {
    // The composition itself: each op checks its own arguments.
    mamba3_prepare(ctx, a.prepare);
    mamba3_scan(ctx, a.scan);
    return;
  }
  const detail::OpCheck c(ctx, "mamba3_prepare_scan");
  const M3Shape p = check_prepare(c, a.prepare);
  const M3Shape s = check_scan(c, a.scan);
  c.dense("o", a.scan.o, {s.B, s.H, s.L, s.R, s.P});
  c.expect(!a.prepare.phases.defined(), "phases are kept by the separate ops only");
  const auto same = [](const Tensor& x, const Tensor& y) { return x.raw() == y.raw(); };
  c.expect(same(a.scan.q, a.prepare.q) && same(a.scan.k, a.prepare.k) &&
               same(a.scan.v, a.prepare.v) && same(a.scan.dt, a.prepare.dt) &&
               same(a.scan.A, a.prepare.A) && same(a.scan.lam, a.prepare.lam),
           "the scan's q, k, v, dt, A and lam must be the prepare's");
  c.expect(p.H == s.H && p.L == s.L && p.B == s.B, "prepare and scan shapes differ");
  Arena::Scope scope(ctx.arena());
  const detail::F32State state(ctx, a.scan.ssm, detail::bf16_state_native(ctx, s.L));
  Mamba3PrepareScanArgs f32 = a;
  f32.scan.ssm = state.tensor();
  detail::run(ctx, fused, f32);
  state.store();
}

void mamba3_scan_backward(Context& ctx, const Mamba3ScanBackwardArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_scan_backward");
  const M3Shape s = check_scan(c, a.fwd);
  c.expect(!a.fwd.ssm.defined() || a.fwd.ssm.dtype() == DType::kF32,
           "the backward takes an F32 state (training starts fresh sequences)");
  c.dense("d_o", a.d_o, {s.B, s.H, s.L, s.R, s.P});
  c.dense("dq", a.dq, a.fwd.q.shape()).dense("dk", a.dk, a.fwd.k.shape()).dense("dv", a.dv, a.fwd.v.shape());
  for (const Tensor* t : {&a.ddt, &a.dA, &a.dlam}) c.dense("ddt/dA/dlam", *t, {s.B, s.H, s.L});
  c.optional("dD", a.dD, {s.H});
  detail::run(ctx, c.kernel(&OpTable::mamba3_scan_backward), a);
}

void mamba3_output(Context& ctx, const Mamba3OutputArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_output");
  const M3Shape s = check_output(c, a);
  c.rows("y", a.y, s.B * s.L, s.H * s.P);
  detail::run(ctx, c.kernel(&OpTable::mamba3_output), a);
}

void mamba3_output_backward(Context& ctx, const Mamba3OutputBackwardArgs& a) {
  const detail::OpCheck c(ctx, "mamba3_output_backward");
  const M3Shape s = check_output(c, a.fwd);
  c.rows("dy", a.dy, s.B * s.L, s.H * s.P).dense("d_o", a.d_o, a.fwd.o.shape());
  c.rows("dz", a.dz, s.B * s.L, s.H * s.P);
  c.optional("dmimo_z", a.dmimo_z, {s.H, s.R, s.P}).optional("dmimo_o", a.dmimo_o, {s.H, s.R, s.P});
  c.optional("dnorm", a.dnorm, {s.H * s.P});
  detail::run(ctx, c.kernel(&OpTable::mamba3_output_backward), a);
}

}  // namespace ssm::ops
