// The Mamba-1 mixer's backward: each op of the forward reversed, in reverse
// order, over what the forward kept:
//   out_proj -> selective scan (dt softplus, A, D, gate) -> dt_proj ->
//   dt/B/C norms -> x_proj -> conv + SiLU -> in_proj.
// FalconMamba's weightless norms are RMS norms with unit weights here.
#include <algorithm>

#include "layers/mamba1_parts.h"
#include "ssm/layers/mamba1_layer.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/selective_scan.h"

namespace ssm {

void Mamba1Layer::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                           Tensor& dx, std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const Mamba1Activations&>(kept);
  const auto& c = cfg_;
  const int64_t B = x.dim(0), L = x.dim(1), Di = c.d_inner, R = c.dt_rank, N = c.d_state;
  Arena::Scope scope(ctx.arena());
  auto alloc = [&](const Shape& s) { return ctx.arena().alloc(DType::kF32, s); };

  const Tensor dys = alloc({B, L, Di});
  ops::linear_backward(ctx, {.x = a.ys,
                             .W = value(out_proj_),
                             .dy = dy,
                             .dx = dys,
                             .dW = grad(grads, out_proj_),
                             .dbias = grad(grads, out_bias_)});

  // dxz collects du (before the conv) | dz; ddbc the gradient of x_proj's
  // output after the norms, ddbc_raw before them.
  const Tensor dxz = alloc({B, L, 2 * Di}), du = alloc({B, L, Di}), ddt_raw = alloc({B, L, Di});
  const Tensor ddbc = alloc({B, L, c.d_x_proj()});
  const Tensor dt_low = a.dbc.cols(0, R), Bm = a.dbc.cols(R, R + N),
               Cm = a.dbc.cols(R + N, R + 2 * N);
  ops::selective_scan_backward(ctx, {.fwd = {.x = a.u,
                                             .dt_raw = a.dt_raw,
                                             .dt_bias = value(dt_bias_),
                                             .A_log = value(A_log_),
                                             .B = Bm,
                                             .C = Cm,
                                             .D = value(D_),
                                             .z = a.xz.cols(Di, 2 * Di)},
                                     .dy = dys,
                                     .dx = du,
                                     .ddt_raw = ddt_raw,
                                     .dB = ddbc.cols(R, R + N),
                                     .dC = ddbc.cols(R + N, R + 2 * N),
                                     .dz = dxz.cols(Di, 2 * Di),
                                     .ddt_bias = grad(grads, dt_bias_),
                                     .dA_log = grad(grads, A_log_),
                                     .dD = grad(grads, D_)});
  ops::linear_backward(ctx, {.x = dt_low,
                             .W = value(dt_proj_),
                             .dy = ddt_raw,
                             .dx = ddbc.cols(0, R),
                             .dW = grad(grads, dt_proj_)});

  Tensor ddbc_raw = ddbc;
  if (c.bcdt_norm) {
    ddbc_raw = alloc({B, L, c.d_x_proj()});
    const Tensor ones = alloc({std::max(R, N)});
    ops::fill(ctx, ones, 1.f);
    const int64_t edges[4] = {0, R, R + N, R + 2 * N};
    const Param* w[3] = {dt_norm_, b_norm_, c_norm_};
    for (int i = 0; i < 3; ++i) {
      const int64_t lo = edges[i], hi = edges[i + 1];
      ops::rms_norm_backward(ctx, {.x = a.dbc_raw.cols(lo, hi),
                                   .w = w[i] ? value(w[i]) : ones.slice(0, 0, hi - lo),
                                   .eps = c.bcdt_eps,
                                   .dout = ddbc.cols(lo, hi),
                                   .dx = ddbc_raw.cols(lo, hi),
                                   .dw = grad(grads, w[i])});
    }
  }
  ops::linear_backward(ctx, {.x = a.u,
                             .W = value(x_proj_),
                             .dy = ddbc_raw,
                             .dx = du,
                             .accumulate_dx = true,
                             .dW = grad(grads, x_proj_)});

  ops::conv1d_backward(ctx, {.in = a.xz.cols(0, Di),
                             .weight = value(conv_),
                             .bias = value(conv_bias_),
                             .silu = true,
                             .dout = du,
                             .din = dxz.cols(0, Di),
                             .dweight = grad(grads, conv_),
                             .dbias = grad(grads, conv_bias_)});
  ops::linear_backward(ctx, {.x = x,
                             .W = value(in_proj_),
                             .dy = dxz,
                             .dx = dx,
                             .dW = grad(grads, in_proj_),
                             .dbias = grad(grads, in_bias_)});
}

}  // namespace ssm
