#include "ssm/layers/mamba2_layer.h"

#include "layers/mamba2_parts.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd.h"

namespace ssm {

Mamba2Layer::Mamba2Layer(const Mamba2Config& config) : cfg_(config) {
  const auto& c = cfg_;
  add_param("in_proj.weight", {c.d_in_proj(), c.d_model});
  if (c.proj_bias) add_param("in_proj.bias", {c.d_in_proj()}, ParamRole::kNoDecay);
  add_param("conv1d.weight", {c.conv_dim(), 1, c.d_conv});
  if (c.conv_bias) add_param("conv1d.bias", {c.conv_dim()}, ParamRole::kNoDecay);
  add_param("dt_bias", {c.nheads()}, ParamRole::kNoDecay);
  add_param("A_log", {c.nheads()}, ParamRole::kNoDecay);
  add_param("D", {c.nheads()}, ParamRole::kNoDecay);
  if (c.rmsnorm) add_param("norm.weight", {c.d_inner()}, ParamRole::kNoDecay);
  add_param("out_proj.weight", {c.d_model, c.d_inner()});
  if (c.proj_bias) add_param("out_proj.bias", {c.d_model}, ParamRole::kNoDecay);
  // params_ no longer grows, so pointers into it stay valid.
  auto find = [&](const char* name, bool present) { return present ? &param(name) : nullptr; };
  in_proj_ = find("in_proj.weight", true);
  in_bias_ = find("in_proj.bias", c.proj_bias);
  conv_ = find("conv1d.weight", true);
  conv_bias_ = find("conv1d.bias", c.conv_bias);
  dt_bias_ = find("dt_bias", true);
  A_log_ = find("A_log", true);
  D_ = find("D", true);
  norm_ = find("norm.weight", c.rmsnorm);
  out_proj_ = find("out_proj.weight", true);
  out_bias_ = find("out_proj.bias", c.proj_bias);
}

std::unique_ptr<LayerState> Mamba2Layer::make_state(int64_t batch, Device device) const {
  auto s = std::make_unique<Mamba2State>();
  s->conv = Tensor::zeros(DType::kF32, {batch, cfg_.d_conv - 1, cfg_.conv_dim()}, device);
  s->ssm = Tensor::zeros(state_dtype_, {batch, cfg_.nheads(), cfg_.headdim, cfg_.d_state}, device);
  return s;
}

void Mamba2Layer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                          std::unique_ptr<LayerActivations>* keep) {
  run(x, y, false, state, ctx, keep);
}

void Mamba2Layer::forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx) {
  run(x, h, true, state, ctx, nullptr);
}

void Mamba2Layer::forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps,
                                     const Tensor& normed, LayerState* state, Context& ctx) {
  if (!fused_step(h, state, ctx) || cfg_.has_multipliers())
    return SequenceLayer::forward_add_normed(h, norm_weight, eps, normed, state, ctx);
  const InputNorm norm{norm_weight, eps};
  run_step(h, h, true, *state, ctx, &norm);
}

bool Mamba2Layer::decode_stack_layer(const Tensor& norm_weight, LayerState* state,
                                     ops::Mamba2StackLayer& out) const {
  auto* st = dynamic_cast<Mamba2State*>(state);
  if (!st || cfg_.has_multipliers()) return false;
  auto v = [](const Param* p) { return p ? p->value : Tensor(); };
  out = {.norm_weight = norm_weight, .in_proj = v(in_proj_), .in_bias = v(in_bias_),
         .conv_weight = v(conv_), .conv_bias = v(conv_bias_), .dt_bias = v(dt_bias_),
         .A_log = v(A_log_), .D = v(D_), .gate_norm_weight = v(norm_), .out_proj = v(out_proj_),
         .out_bias = v(out_bias_), .conv_state = st->conv, .state = st->ssm};
  return true;
}

bool Mamba2Layer::fused_step(const Tensor& x, LayerState* state, Context& ctx) const {
  return state && x.dim(1) == 1 && ops::has_ssd_step(ctx);
}

// A decode step (one token, states, nothing kept): the block's RMSNorm
// inside the in projection (when given), the fused op between the
// projections, ungated, and the gated norm inside the out projection, which
// a GPU backend runs in three launches (ops::norm_linear twice, ssd_step),
// not eight.
void Mamba2Layer::run_step(const Tensor& x, const Tensor& y, bool add_to_y, LayerState& state,
                           Context& ctx, const InputNorm* norm) {
  const auto& c = cfg_;
  const Mamba2Split s(c);
  const int64_t B = x.dim(0);
  auto& st = static_cast<Mamba2State&>(state);
  SSM_CHECK(st.ssm.dim(0) == B, "state holds ", st.ssm.dim(0), " sequences, input has ", B);
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, false);
  const Tensor zxbcdt = work({B, 1, c.d_in_proj()});
  if (norm) {
    ops::norm_linear(ctx, {.x = x, .norm_weight = norm->weight, .eps = norm->eps,
                           .W = value(in_proj_), .bias = value(in_bias_), .y = zxbcdt});
  } else if (c.has_multipliers()) {
    project_with_multipliers(x, zxbcdt, ctx);
  } else {
    ops::linear(ctx, {.x = x, .W = value(in_proj_), .bias = value(in_bias_), .y = zxbcdt});
  }
  const Tensor ys_step = work({B, 1, s.d_inner});
  ops::ssd_step(ctx, {.groups = c.ngroups, .z = s.z(zxbcdt), .xbc = s.conv_in(zxbcdt),
                      .dt_raw = s.dt(zxbcdt), .conv_weight = value(conv_),
                      .conv_bias = value(conv_bias_), .conv_state = st.conv,
                      .dt_bias = value(dt_bias_), .A_log = value(A_log_),
                      .dt_min = static_cast<float>(c.dt_limit_lo),
                      .dt_max = static_cast<float>(c.dt_limit_hi), .D = value(D_),
                      .state = st.ssm, .out = ys_step, .gated = false});
  ops::norm_linear(ctx, {.x = ys_step, .gate = s.z(zxbcdt), .norm_weight = value(norm_),
                         .group = s.d_inner / c.ngroups, .eps = c.norm_eps,
                         .norm_before_gate = c.norm_before_gate, .W = value(out_proj_),
                         .bias = value(out_bias_), .y = y, .accumulate = add_to_y});
}

void Mamba2Layer::run(const Tensor& x, const Tensor& y, bool add_to_y, LayerState* state, Context& ctx,
                      std::unique_ptr<LayerActivations>* keep) {
  if (!keep && fused_step(x, state, ctx)) return run_step(x, y, add_to_y, *state, ctx, nullptr);
  const auto& c = cfg_;
  const Mamba2Split s(c);
  const int64_t B = x.dim(0), L = x.dim(1);
  auto* st = static_cast<Mamba2State*>(state);
  if (st) SSM_CHECK(st->ssm.dim(0) == B, "state holds ", st->ssm.dim(0), " sequences, input has ", B);
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);

  // [z | xBC | dt] = u in_proj^T
  const Tensor zxbcdt = work({B, L, c.d_in_proj()});
  if (c.has_multipliers()) {
    project_with_multipliers(x, zxbcdt, ctx);
  } else {
    ops::linear(ctx, {.x = x, .W = value(in_proj_), .bias = value(in_bias_), .y = zxbcdt});
  }

  // xBC = SiLU(conv(xBC) + bias)
  const Tensor xbc = work({B, L, s.conv_dim});
  ops::conv1d(ctx, {.in = s.conv_in(zxbcdt), .weight = value(conv_), .bias = value(conv_bias_),
                    .state = st ? st->conv : Tensor(), .out = xbc, .silu = true});

  // dt = clamp(softplus(dt + dt_bias)), A = -exp(A_log)
  const Tensor dt = work({B, L, s.H}), A = work({s.H});
  ops::ssd_prepare(ctx, {.dt_raw = s.dt(zxbcdt), .dt_bias = value(dt_bias_), .A_log = value(A_log_),
                         .dt_min = static_cast<float>(c.dt_limit_lo),
                         .dt_max = static_cast<float>(c.dt_limit_hi), .dt = dt, .A = A});

  // S = exp(dt A) S + dt x B^T,  y = S C + D x
  const Tensor ys = work({B, L, s.d_inner});
  ops::ssd_scan(ctx, {.groups = c.ngroups, .chunk = c.chunk_size, .x = s.x(xbc), .B = s.B(xbc),
                      .C = s.C(xbc), .dt = dt, .A = A, .D = value(D_), .y = ys,
                      .state = st ? st->ssm : Tensor(),
                      .bf16_state_products = value(in_proj_).dtype() == DType::kBF16});

  // y = GroupRMSNorm(y * SiLU(z)) * w   (or y * SiLU(z) without the norm),
  // in place unless ys is kept; the normed rows themselves are not kept
  // (the backward makes them again: d_inner floats a token a layer less to
  // hold through the step, for one norm pass).
  const Tensor yn = keep ? ctx.arena().alloc(DType::kF32, {B, L, s.d_inner}) : ys;
  gated_norm(ys, s.z(zxbcdt), yn, ctx);
  ops::linear(ctx, {.x = yn, .W = value(out_proj_), .bias = value(out_bias_), .y = y,
                      .accumulate = add_to_y});

  if (keep) {
    auto a = std::make_unique<Mamba2Activations>();
    a->zxbcdt = zxbcdt, a->xbc = xbc, a->dt = dt, a->A = A, a->ys = ys;
    *keep = std::move(a);
  }
}

void Mamba2Layer::gated_norm(const Tensor& ys, const Tensor& z, const Tensor& out, Context& ctx) const {
  const auto& c = cfg_;
  ops::gated_rms_norm(ctx, {.y = ys, .z = z, .w = value(norm_), .group = c.d_inner() / c.ngroups,
                            .eps = c.norm_eps, .norm_before_gate = c.norm_before_gate, .out = out});
}

void Mamba2Layer::project_with_multipliers(const Tensor& x, const Tensor& zxbcdt, Context& ctx) {
  const auto& c = cfg_;
  const Mamba2Split s(c);
  Arena::Scope scope(ctx.arena());
  // in_proj(x * m_in): the scaled input is a copy, x is shared with others.
  Tensor u = x;
  if (c.in_multiplier != 1.f) {
    u = ctx.arena().alloc(DType::kF32, x.shape());
    ops::copy(ctx, u, x);
    ops::scale(ctx, u, c.in_multiplier);
  }
  ops::linear(ctx, {.x = u, .W = value(in_proj_), .bias = value(in_bias_), .y = zxbcdt});
  // Then each block of the output times its factor: z, x, B, C, dt.
  const int64_t edges[6] = {0, s.d_inner, 2 * s.d_inner, 2 * s.d_inner + s.GN, 2 * s.d_inner + 2 * s.GN,
                            c.d_in_proj()};
  for (int part = 0; part < 5; ++part)
    if (c.part_multipliers[part] != 1.f)
      ops::scale(ctx, zxbcdt.cols(edges[part], edges[part + 1]), c.part_multipliers[part]);
}

std::vector<TrainableSlice> Mamba2Layer::trainable_parameters() {
  if (!wsla_) return SequenceLayer::trainable_parameters();
  // WSLA trains the B and C rows of in_proj only (SPEC §6).
  const int64_t begin = 2 * cfg_.d_inner();
  return {{in_proj_, begin, begin + 2 * cfg_.ngroups * cfg_.d_state}};
}

}  // namespace ssm
