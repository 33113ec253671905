// The fused Mamba-2 decode step (ssm/ops/ssd.h): its argument checks and
// its definition through the four ops it stands for.
#include "ops/op_check.h"
#include "ops/ssd_step_composed.h"
#include "ops/state_dtype.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/rms_norm.h"

namespace ssm::ops {

void ssd_step(Context& ctx, const SsdStepArgs& a) {
  const detail::OpCheck c(ctx, "ssd_step");
  c.rows("z", a.z).expect(a.z.ndim() == 3 && a.z.dim(1) == 1, "z must be (B, 1, H*P)");
  c.expect(a.dt_bias.defined() && a.dt_bias.ndim() == 1, "dt_bias must be (H)");
  const int64_t B = a.z.dim(0), H = a.dt_bias.dim(0), HP = a.z.cols();
  c.expect(H > 0 && HP % H == 0, "z's width must be H*P");
  c.expect(a.groups > 0 && H % a.groups == 0, "groups must divide the heads");
  c.rows("xbc", a.xbc, B, -1)
      .expect((a.xbc.cols() - HP) % (2 * a.groups) == 0 && a.xbc.cols() > HP,
              "xbc's width must be H*P + 2*G*N");
  const int64_t C = a.xbc.cols(), N = (C - HP) / (2 * a.groups), P = HP / H;
  c.expect(a.conv_weight.defined() && a.conv_weight.ndim() == 3, "conv_weight must be (C, 1, K)");
  const int64_t K = a.conv_weight.dim(2);
  c.dense("conv_weight", a.conv_weight, {C, 1, K}).optional("conv_bias", a.conv_bias, {C});
  c.dense("conv_state", a.conv_state, {B, K - 1, C});
  c.rows("dt_raw", a.dt_raw, B, H).dense("dt_bias", a.dt_bias, {H}).dense("A_log", a.A_log, {H});
  c.optional("D", a.D, {H}).optional("norm_weight", a.norm_weight, {HP});
  c.expect(a.norm_group >= 0 && (a.norm_group == 0 || HP % a.norm_group == 0),
           "norm_group must divide H*P");
  c.expect(a.state.defined(), "state is missing").state("state", a.state, {B, H, P, N});
  c.rows("out", a.out, B, HP);
  const auto kernel = c.kernel(&OpTable::ssd_step);
  detail::run_with_f32_state(ctx, kernel, a, &SsdStepArgs::state, detail::bf16_state_native(ctx, 1));
}

bool has_ssd_step(const Context& ctx) { return ctx.backend().ops().ssd_step != nullptr; }

namespace detail {

SsdStepScratch ssd_step_begin(Context& ctx, const SsdStepArgs& a) {
  const int64_t B = a.z.dim(0), H = a.dt_bias.dim(0), HP = a.z.cols(), C = a.xbc.cols();
  Arena& arena = ctx.arena();
  SsdStepScratch s{.xbc = arena.alloc(DType::kF32, {B, 1, C}),
                   .dt = arena.alloc(DType::kF32, {B, 1, H}),
                   .A = arena.alloc(DType::kF32, {H}),
                   // Ungated: the scan's y is the output.
                   .ys = a.gated ? arena.alloc(DType::kF32, {B, 1, HP}) : a.out};
  ssd_prepare(ctx, {.dt_raw = a.dt_raw,
                    .dt_bias = a.dt_bias,
                    .A_log = a.A_log,
                    .dt_min = a.dt_min,
                    .dt_max = a.dt_max,
                    .dt = s.dt,
                    .A = s.A});
  return s;
}

SsdScanArgs SsdStepScratch::scan_args(const SsdStepArgs& a) const {
  const int64_t HP = a.z.cols(), C = a.xbc.cols(), GN = (C - HP) / 2;
  return {.groups = a.groups,
          .x = xbc.cols(0, HP),
          .B = xbc.cols(HP, HP + GN),
          .C = xbc.cols(HP + GN, C),
          .dt = dt,
          .A = A,
          .D = a.D,
          .y = ys,
          .state = a.state};
}

void ssd_step_end(Context& ctx, const SsdStepArgs& a, const SsdStepScratch& s) {
  if (!a.gated) return;
  gated_rms_norm(ctx, {.y = s.ys,
                       .z = a.z,
                       .w = a.norm_weight,
                       .group = a.norm_group,
                       .eps = a.eps,
                       .norm_before_gate = a.norm_before_gate,
                       .out = a.out});
}

void ssd_step_composed(Context& ctx, const SsdStepArgs& a) {
  const SsdStepScratch s = ssd_step_begin(ctx, a);
  conv1d(ctx, {.in = a.xbc,
               .weight = a.conv_weight,
               .bias = a.conv_bias,
               .state = a.conv_state,
               .out = s.xbc,
               .silu = true});
  ssd_scan(ctx, s.scan_args(a));
  ssd_step_end(ctx, a, s);
}

}  // namespace detail
}  // namespace ssm::ops
