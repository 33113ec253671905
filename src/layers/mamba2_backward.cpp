// The Mamba-2 mixer's backward: each op of the forward reversed, in reverse
// order, over what the forward kept:
//   out_proj -> gated norm -> SSD scan -> dt / A -> conv + SiLU -> in_proj.
#include "layers/mamba2_parts.h"
#include "ssm/layers/mamba2_layer.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd.h"

namespace ssm {

void Mamba2Layer::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                           Tensor& dx, std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const Mamba2Activations&>(kept);
  const auto& c = cfg_;
  const Mamba2Split s(c);
  const int64_t B = x.dim(0), L = x.dim(1);
  Arena::Scope scope(ctx.arena());
  Arena& work = ctx.arena();

  const Tensor yn = work.alloc(DType::kF32, {B, L, s.d_inner});
  gated_norm(a.ys, s.z(a.zxbcdt), yn, ctx);
  const Tensor dyn = work.alloc(DType::kF32, {B, L, s.d_inner});
  ops::linear_backward(ctx, {.x = yn, .W = value(out_proj_), .dy = dy, .dx = dyn,
                             .dW = grad(grads, out_proj_), .dbias = grad(grads, out_bias_)});

  // dzxbcdt collects dz | d(conv input) | d(dt raw), the blocks in_proj produced.
  const Tensor dzxbcdt = work.alloc(DType::kF32, {B, L, c.d_in_proj()});
  const Tensor dys = work.alloc(DType::kF32, {B, L, s.d_inner});
  ops::gated_rms_norm_backward(ctx, {.y = a.ys, .z = s.z(a.zxbcdt), .w = value(norm_),
                                     .group = s.d_inner / c.ngroups, .eps = c.norm_eps,
                                     .norm_before_gate = c.norm_before_gate, .dout = dyn,
                                     .dy = dys, .dz = s.z(dzxbcdt), .dw = grad(grads, norm_)});

  const Tensor dxbc = work.alloc(DType::kF32, {B, L, s.conv_dim});
  const Tensor ddt = work.alloc(DType::kF32, {B, L, s.H});
  const Tensor dA = work.zeros(DType::kF32, {s.H});
  ops::ssd_scan_backward(
      ctx, {.fwd = {.groups = c.ngroups, .chunk = c.chunk_size, .x = s.x(a.xbc), .B = s.B(a.xbc),
                    .C = s.C(a.xbc), .dt = a.dt, .A = a.A, .D = value(D_)},
            .dy = dys, .dx = s.x(dxbc), .dB = s.B(dxbc), .dC = s.C(dxbc), .ddt = ddt, .dA = dA,
            .dD = grad(grads, D_)});

  ops::ssd_prepare_backward(ctx, {.dt_raw = s.dt(a.zxbcdt), .dt_bias = value(dt_bias_),
                                  .A_log = value(A_log_),
                                  .dt_min = static_cast<float>(c.dt_limit_lo),
                                  .dt_max = static_cast<float>(c.dt_limit_hi), .ddt = ddt,
                                  .dA = dA, .ddt_raw = s.dt(dzxbcdt),
                                  .ddt_bias = grad(grads, dt_bias_), .dA_log = grad(grads, A_log_)});

  ops::conv1d_backward(ctx, {.in = s.conv_in(a.zxbcdt), .weight = value(conv_),
                             .bias = value(conv_bias_), .silu = true, .dout = dxbc,
                             .din = s.conv_in(dzxbcdt), .dweight = grad(grads, conv_),
                             .dbias = grad(grads, conv_bias_)});

  if (!c.has_multipliers()) {
    ops::linear_backward(ctx, {.x = x, .W = value(in_proj_), .dy = dzxbcdt, .dx = dx,
                               .dW = grad(grads, in_proj_), .dbias = grad(grads, in_bias_)});
    return;
  }
  // Falcon-H1: zxbcdt's blocks were each times a multiplier after in_proj,
  // whose input was x times in_multiplier.
  const int64_t edges[6] = {0, s.d_inner, 2 * s.d_inner, 2 * s.d_inner + s.GN, 2 * s.d_inner + 2 * s.GN,
                            c.d_in_proj()};
  for (int part = 0; part < 5; ++part)
    if (c.part_multipliers[part] != 1.f)
      ops::scale(ctx, dzxbcdt.cols(edges[part], edges[part + 1]), c.part_multipliers[part]);
  Tensor u = x;
  if (c.in_multiplier != 1.f) {
    u = work.alloc(DType::kF32, x.shape());
    ops::copy(ctx, u, x);
    ops::scale(ctx, u, c.in_multiplier);
  }
  ops::linear_backward(ctx, {.x = u, .W = value(in_proj_), .dy = dzxbcdt, .dx = dx,
                             .dW = grad(grads, in_proj_), .dbias = grad(grads, in_bias_)});
  if (c.in_multiplier != 1.f) ops::scale(ctx, dx, c.in_multiplier);
}

}  // namespace ssm
