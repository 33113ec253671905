// The Mamba-3 mixer's forward over one batch of rows, and its backward:
//   in_proj -> prepare (dt, A, lam; q, k from normed, biased, rotated C, B;
//   v = x mimo_x) -> trapezoidal scan -> output (gate / norm, MIMO
//   down-projection) -> out_proj, and each op reversed in reverse order.
#include "layers/mamba3_parts.h"
#include "ssm/layers/mamba3_layer.h"
#include "ssm/ops/linear.h"

namespace ssm {

void Mamba3Layer::run(const Tensor& x, const Tensor& y, Mamba3State* st, Context& ctx,
                      Mamba3Activations* keep, bool add_to_y, const InputNorm* norm) {
  const auto& c = cfg_;
  const Mamba3Split s(c);
  const int64_t B = x.dim(0), L = x.dim(1), H = c.nheads(), P = c.headdim;
  const int64_t R = c.rank();
  if (st) SSM_CHECK(st->ssm.dim(0) == B, "state holds ", st->ssm.dim(0), " sequences, input has ", B);
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);

  // [z | x | B | C | ddt | ddA | trap | ang] = u in_proj^T
  const Tensor proj = work({B, L, c.d_in_proj()});
  SSM_CHECK(!(norm && keep), "a normalised input is not kept");
  if (norm)
    ops::norm_linear(ctx, {.x = x, .norm_weight = norm->weight, .eps = norm->eps,
                           .W = value(in_proj_), .y = proj});
  else
    ops::linear(ctx, {.x = x, .W = value(in_proj_), .y = proj});

  // dt, A, lam; q, k from normed, biased, rotated C, B; v = x * mimo_x.
  // What the prepare op makes (q, k and v alone are 2 N + P floats a head
  // a token) is not kept for training: the backward makes it again from
  // the kept proj and the starting phase (prepare_again).
  const Tensor phase = st ? st->phase : work.zeros({B, H, s.S});
  if (keep) keep->phase0 = work.copy(phase);
  const ops::Mamba3PrepareArgs prep = with_prepare_outputs(
      {.heads = H, .groups = c.ngroups, .rank = R,
       .pairs = c.is_mimo ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
       .A_floor = static_cast<float>(c.A_floor), .norm_eps = c.norm_eps,
       .x = s.x(proj), .B = s.B(proj), .C = s.C(proj), .ddt = s.ddt(proj), .ddA = s.ddA(proj),
       .trap = s.trap(proj), .ang = s.ang(proj),
       .dt_bias = value(dt_bias_), .B_norm = value(B_norm_), .C_norm = value(C_norm_),
       .B_bias = value(B_bias_), .C_bias = value(C_bias_), .mimo_x = value(mimo_x_),
       .phase = phase},
      Workspace(ctx, false), /*phases=*/false);

  // The trapezoidal recurrence: o_t,r = S_t q_t,r + D v_t,r.
  const ops::Mamba3ScanArgs scan{
      .chunk = c.chunk_size, .q = prep.q, .k = prep.k, .v = prep.v, .dt = prep.dt, .A = prep.A,
      .lam = prep.lam, .D = value(D_), .o = work({B, H, L, R, P}),
      .ssm = st ? st->ssm : Tensor(), .k_prev = st ? st->k_prev : Tensor(),
      .v_prev = st ? st->v_prev : Tensor(),
      .bf16_state_products = !keep && value(in_proj_).dtype() == DType::kBF16};
  if (keep) {
    ops::mamba3_prepare(ctx, prep);
    ops::mamba3_scan(ctx, scan);
  } else {
    // Inference needs q, k and v only inside the scan: a backend may fuse
    // the two ops and keep them per head in its caches.
    ops::mamba3_prepare_scan(ctx, {.prepare = prep, .scan = scan});
  }

  // y_h = sum_r [RMSNorm(o_r) * w] * SiLU(z * mimo_z_r) * mimo_o_r
  ops::Mamba3OutputArgs out{
      .rank = R, .o = scan.o, .z = s.z(proj), .mimo_z = value(mimo_z_), .mimo_o = value(mimo_o_),
      .norm = value(norm_), .norm_eps = c.norm_eps};
  if (!keep && L == 1 && !out.mimo_z.defined() && !out.mimo_o.defined()) {
    // A SISO decode step: the per-head norm and the gate are norm_linear's
    // gated norm of P-channel groups, inside the out projection (one GPU
    // launch where mamba3_output and linear took two).
    ops::norm_linear(ctx, {.x = scan.o.reshape({B, s.d_inner}), .gate = out.z, .norm_weight = out.norm,
                           .group = P, .eps = c.norm_eps, .norm_before_gate = true,
                           .W = value(out_proj_), .y = y, .accumulate = add_to_y});
  } else {
    out.y = work({B, L, s.d_inner});
    ops::mamba3_output(ctx, out);
    ops::linear(ctx, {.x = out.y, .W = value(out_proj_), .y = y, .accumulate = add_to_y});
  }
  if (keep) {
    keep->proj = proj;
    keep->prepare = prep;
    keep->scan = scan;
    keep->output = out;
    keep->forget_prepare_outputs();
  }
}

ops::Mamba3PrepareArgs Mamba3Layer::with_prepare_outputs(ops::Mamba3PrepareArgs p, const Workspace& work,
                                                         bool phases) const {
  const auto& c = cfg_;
  const Mamba3Split s(c);
  const int64_t B = p.x.dim(0), L = p.x.dim(1), H = c.nheads(), R = c.rank();
  p.B_normed = work({B, L, s.RGN}), p.C_normed = work({B, L, s.RGN});
  p.ang_rate = work({B, L, s.S});
  p.dt = work({B, H, L}), p.A = work({B, H, L}), p.lam = work({B, H, L});
  p.q = work({B, H, L, R, c.d_state}), p.k = work({B, H, L, R, c.d_state});
  p.v = work({B, H, L, R, c.headdim});
  p.phases = phases ? work({B, H, L, s.S}) : Tensor();
  return p;
}

std::pair<ops::Mamba3PrepareArgs, ops::Mamba3ScanArgs> Mamba3Layer::prepare_again(
    const Mamba3Activations& a, Context& ctx) const {
  // In the context's arena: the caller's scope holds them.
  const Workspace work(ctx, false);
  ops::Mamba3PrepareArgs prep = a.prepare;
  prep.phase = work.copy(a.phase0);
  prep = with_prepare_outputs(prep, work, /*phases=*/true);
  ops::mamba3_prepare(ctx, prep);
  ops::Mamba3ScanArgs scan = a.scan;
  scan.q = prep.q, scan.k = prep.k, scan.v = prep.v;
  scan.dt = prep.dt, scan.A = prep.A, scan.lam = prep.lam;
  return {prep, scan};
}

void Mamba3Layer::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                           Tensor& dx, std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const Mamba3Activations&>(kept);
  const Mamba3Split s(cfg_);
  const int64_t B = x.dim(0), L = x.dim(1);
  Arena::Scope scope(ctx.arena());
  Arena& work = ctx.arena();
  auto like = [&](const Tensor& t) { return work.alloc(DType::kF32, t.shape()); };

  const Tensor dys = like(a.output.y);
  ops::linear_backward(ctx, {.x = a.output.y, .W = value(out_proj_), .dy = dy, .dx = dys,
                             .dW = grad(grads, out_proj_)});

  // dproj collects the gradients of every in_proj column block.
  const Tensor dproj = work.alloc(DType::kF32, {B, L, cfg_.d_in_proj()});
  const Tensor d_o = like(a.scan.o);
  ops::mamba3_output_backward(ctx, {.fwd = a.output, .dy = dys, .d_o = d_o, .dz = s.z(dproj),
                                    .dmimo_z = grad(grads, mimo_z_),
                                    .dmimo_o = grad(grads, mimo_o_), .dnorm = grad(grads, norm_)});

  const auto [prep, scan] = prepare_again(a, ctx);
  const Tensor dq = like(scan.q), dk = like(scan.k), dv = like(scan.v);
  const Tensor ddt = like(scan.dt), dA = like(scan.A), dlam = like(scan.lam);
  ops::mamba3_scan_backward(ctx, {.fwd = scan, .d_o = d_o, .dq = dq, .dk = dk, .dv = dv,
                                  .ddt = ddt, .dA = dA, .dlam = dlam, .dD = grad(grads, D_)});

  ops::mamba3_prepare_backward(
      ctx, {.fwd = prep, .dq = dq, .dk = dk, .dv = dv, .ddt = ddt, .dA = dA, .dlam = dlam,
            .dx = s.x(dproj), .dB = s.B(dproj), .dC = s.C(dproj), .dddt = s.ddt(dproj),
            .dddA = s.ddA(dproj), .dtrap = s.trap(dproj), .dang = s.ang(dproj),
            .ddt_bias = grad(grads, dt_bias_), .dB_norm = grad(grads, B_norm_),
            .dC_norm = grad(grads, C_norm_), .dB_bias = grad(grads, B_bias_),
            .dC_bias = grad(grads, C_bias_), .dmimo_x = grad(grads, mimo_x_)});

  ops::linear_backward(ctx, {.x = x, .W = value(in_proj_), .dy = dproj, .dx = dx,
                             .dW = grad(grads, in_proj_)});
}

}  // namespace ssm
