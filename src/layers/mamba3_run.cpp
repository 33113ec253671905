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
  const int64_t B = x.dim(0), L = x.dim(1), H = c.nheads(), P = c.headdim, N = c.d_state;
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
  const ops::Mamba3PrepareArgs prep{
      .heads = H, .groups = c.ngroups, .rank = R,
      .pairs = c.is_mimo ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
      .A_floor = static_cast<float>(c.A_floor), .norm_eps = c.norm_eps,
      .x = s.x(proj), .B = s.B(proj), .C = s.C(proj), .ddt = s.ddt(proj), .ddA = s.ddA(proj),
      .trap = s.trap(proj), .ang = s.ang(proj),
      .dt_bias = value(dt_bias_), .B_norm = value(B_norm_), .C_norm = value(C_norm_),
      .B_bias = value(B_bias_), .C_bias = value(C_bias_), .mimo_x = value(mimo_x_),
      .phase = st ? st->phase : work.zeros({B, H, s.S}),
      .B_normed = work({B, L, s.RGN}), .C_normed = work({B, L, s.RGN}),
      .ang_rate = work({B, L, s.S}), .dt = work({B, H, L}), .A = work({B, H, L}),
      .lam = work({B, H, L}), .q = work({B, H, L, R, N}), .k = work({B, H, L, R, N}),
      .v = work({B, H, L, R, P}), .phases = keep ? work({B, H, L, s.S}) : Tensor()};

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
  const ops::Mamba3OutputArgs out{
      .rank = R, .o = scan.o, .z = s.z(proj), .mimo_z = value(mimo_z_), .mimo_o = value(mimo_o_),
      .norm = value(norm_), .norm_eps = c.norm_eps, .y = work({B, L, s.d_inner})};
  ops::mamba3_output(ctx, out);

  ops::linear(ctx, {.x = out.y, .W = value(out_proj_), .y = y, .accumulate = add_to_y});
  if (keep) {
    keep->proj = proj;
    keep->prepare = prep;
    keep->scan = scan;
    keep->output = out;
  }
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

  const Tensor dq = like(a.scan.q), dk = like(a.scan.k), dv = like(a.scan.v);
  const Tensor ddt = like(a.scan.dt), dA = like(a.scan.A), dlam = like(a.scan.lam);
  ops::mamba3_scan_backward(ctx, {.fwd = a.scan, .d_o = d_o, .dq = dq, .dk = dk, .dv = dv,
                                  .ddt = ddt, .dA = dA, .dlam = dlam, .dD = grad(grads, D_)});

  ops::mamba3_prepare_backward(
      ctx, {.fwd = a.prepare, .dq = dq, .dk = dk, .dv = dv, .ddt = ddt, .dA = dA, .dlam = dlam,
            .dx = s.x(dproj), .dB = s.B(dproj), .dC = s.C(dproj), .dddt = s.ddt(dproj),
            .dddA = s.ddA(dproj), .dtrap = s.trap(dproj), .dang = s.ang(dproj),
            .ddt_bias = grad(grads, dt_bias_), .dB_norm = grad(grads, B_norm_),
            .dC_norm = grad(grads, C_norm_), .dB_bias = grad(grads, B_bias_),
            .dC_bias = grad(grads, C_bias_), .dmimo_x = grad(grads, mimo_x_)});

  ops::linear_backward(ctx, {.x = x, .W = value(in_proj_), .dy = dproj, .dx = dx,
                             .dW = grad(grads, in_proj_)});
}

}  // namespace ssm
