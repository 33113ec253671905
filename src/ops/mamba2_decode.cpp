// The Mamba-2 decode stack (ssm/ops/mamba2_decode.h): its argument checks,
// and its definition through the ops of Mamba2Layer's decode step.
#include "ops/op_check.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/ssd.h"

namespace ssm::ops {

void mamba2_decode_stack(Context& ctx, const Mamba2DecodeStackArgs& a) {
  const detail::OpCheck c(ctx, "mamba2_decode_stack");
  c.expect(a.h.defined() && a.h.ndim() == 3 && a.h.dim(1) == 1, "h must be (B, 1, D)");
  const int64_t B = a.h.dim(0), D = a.h.dim(2);
  c.dense("h", a.h, {B, 1, D});
  c.expect(a.groups > 0, "groups must be positive");
  for (const Mamba2StackLayer& l : a.layers) {
    c.expect(l.in_proj.defined() && l.in_proj.ndim() == 2 && l.out_proj.defined() &&
                 l.out_proj.ndim() == 2 && l.state.defined() && l.state.ndim() == 4 &&
                 l.dt_bias.defined() && l.conv_weight.defined() && l.conv_weight.ndim() == 3,
             "every layer needs in_proj, out_proj, conv_weight, dt_bias and a state");
    const int64_t H = l.dt_bias.dim(0), P = l.state.dim(2), N = l.state.dim(3), HP = H * P;
    const int64_t C = HP + 2 * a.groups * N, K = l.conv_weight.dim(2);
    c.expect(H % a.groups == 0, "groups must divide the heads");
    c.expect(l.in_proj.dtype() == l.out_proj.dtype(), "in_proj and out_proj differ in dtype");
    c.dense("in_proj", l.in_proj, {2 * HP + 2 * a.groups * N + H, D}, l.in_proj.dtype());
    c.dense("out_proj", l.out_proj, {D, HP}, l.out_proj.dtype());
    c.dense("norm_weight", l.norm_weight, {D}).optional("in_bias", l.in_bias, {l.in_proj.dim(0)});
    c.dense("conv_weight", l.conv_weight, {C, 1, K}).optional("conv_bias", l.conv_bias, {C});
    c.dense("dt_bias", l.dt_bias, {H}).dense("A_log", l.A_log, {H}).optional("D", l.D, {H});
    c.optional("gate_norm_weight", l.gate_norm_weight, {HP}).optional("out_bias", l.out_bias, {D});
    c.dense("conv_state", l.conv_state, {B, K - 1, C}).state("state", l.state, {B, H, P, N});
    c.expect(a.norm_group >= 0 && (a.norm_group == 0 || HP % a.norm_group == 0),
             "norm_group must divide H*P");
  }
  const auto fused = ctx.backend().ops().mamba2_decode_stack;
  if (a.layers.empty() || (fused && detail::run(ctx, fused, a))) return;
  detail::mamba2_decode_stack_composed(ctx, a);
}

bool has_mamba2_decode_stack(const Context& ctx) {
  return ctx.backend().ops().mamba2_decode_stack != nullptr;
}

namespace detail {

void mamba2_decode_stack_composed(Context& ctx, const Mamba2DecodeStackArgs& a) {
  const int64_t B = a.h.dim(0);
  for (const Mamba2StackLayer& l : a.layers) {
    Arena::Scope scope(ctx.arena());
    const int64_t H = l.dt_bias.dim(0), HP = H * l.state.dim(2), C = l.conv_weight.dim(0);
    const Tensor zxbcdt = ctx.arena().alloc(DType::kF32, {B, 1, l.in_proj.dim(0)});
    norm_linear(ctx, {.x = a.h,
                      .norm_weight = l.norm_weight,
                      .eps = a.eps,
                      .W = l.in_proj,
                      .bias = l.in_bias,
                      .y = zxbcdt});
    const Tensor z = zxbcdt.cols(0, HP), y = ctx.arena().alloc(DType::kF32, {B, 1, HP});
    ssd_step(ctx, {.groups = a.groups,
                   .z = z,
                   .xbc = zxbcdt.cols(HP, HP + C),
                   .dt_raw = zxbcdt.cols(HP + C, HP + C + H),
                   .conv_weight = l.conv_weight,
                   .conv_bias = l.conv_bias,
                   .conv_state = l.conv_state,
                   .dt_bias = l.dt_bias,
                   .A_log = l.A_log,
                   .dt_min = a.dt_min,
                   .dt_max = a.dt_max,
                   .D = l.D,
                   .state = l.state,
                   .out = y,
                   .gated = false});
    norm_linear(ctx, {.x = y,
                      .gate = z,
                      .norm_weight = l.gate_norm_weight,
                      .group = a.norm_group,
                      .eps = a.gate_eps,
                      .norm_before_gate = a.norm_before_gate,
                      .W = l.out_proj,
                      .bias = l.out_bias,
                      .y = a.h,
                      .accumulate = true});
  }
}

}  // namespace detail
}  // namespace ssm::ops
