#include "ssm/layers/mamba1_layer.h"

#include "layers/mamba1_parts.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/selective_scan.h"

namespace ssm {

Mamba1Layer::Mamba1Layer(const Mamba1Config& config) : cfg_(config) {
  const auto& c = cfg_;
  add_param("in_proj.weight", {2 * c.d_inner, c.d_model});
  if (c.proj_bias) add_param("in_proj.bias", {2 * c.d_inner}, ParamRole::kNoDecay);
  add_param("conv1d.weight", {c.d_inner, 1, c.d_conv});
  if (c.conv_bias) add_param("conv1d.bias", {c.d_inner}, ParamRole::kNoDecay);
  add_param("x_proj.weight", {c.d_x_proj(), c.d_inner});
  add_param("dt_proj.weight", {c.d_inner, c.dt_rank});
  add_param("dt_proj.bias", {c.d_inner}, ParamRole::kNoDecay);
  add_param("A_log", {c.d_inner, c.d_state}, ParamRole::kNoDecay);
  add_param("D", {c.d_inner}, ParamRole::kNoDecay);
  add_param("out_proj.weight", {c.d_model, c.d_inner});
  if (c.proj_bias) add_param("out_proj.bias", {c.d_model}, ParamRole::kNoDecay);
  const bool norm_w = c.bcdt_norm && c.bcdt_norm_weights;
  if (norm_w) {
    add_param("dt_layernorm.weight", {c.dt_rank}, ParamRole::kNoDecay);
    add_param("b_layernorm.weight", {c.d_state}, ParamRole::kNoDecay);
    add_param("c_layernorm.weight", {c.d_state}, ParamRole::kNoDecay);
  }
  // params_ no longer grows, so pointers into it stay valid.
  auto find = [&](const char* name, bool present) { return present ? &param(name) : nullptr; };
  in_proj_ = find("in_proj.weight", true);
  in_bias_ = find("in_proj.bias", c.proj_bias);
  conv_ = find("conv1d.weight", true);
  conv_bias_ = find("conv1d.bias", c.conv_bias);
  x_proj_ = find("x_proj.weight", true);
  dt_proj_ = find("dt_proj.weight", true);
  dt_bias_ = find("dt_proj.bias", true);
  A_log_ = find("A_log", true);
  D_ = find("D", true);
  out_proj_ = find("out_proj.weight", true);
  out_bias_ = find("out_proj.bias", c.proj_bias);
  dt_norm_ = find("dt_layernorm.weight", norm_w);
  b_norm_ = find("b_layernorm.weight", norm_w);
  c_norm_ = find("c_layernorm.weight", norm_w);
}

std::unique_ptr<LayerState> Mamba1Layer::make_state(int64_t batch, Device device) const {
  auto s = std::make_unique<Mamba1State>();
  s->conv = Tensor::zeros(DType::kF32, {batch, cfg_.d_conv - 1, cfg_.d_inner}, device);
  s->ssm = Tensor::zeros(DType::kF32, {batch, cfg_.d_inner, cfg_.d_state}, device);
  return s;
}

void Mamba1Layer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                          std::unique_ptr<LayerActivations>* keep) {
  const auto& c = cfg_;
  const int64_t B = x.dim(0), L = x.dim(1), Di = c.d_inner, R = c.dt_rank, N = c.d_state;
  auto* st = static_cast<Mamba1State*>(state);
  if (st) SSM_CHECK(st->ssm.dim(0) == B, "state holds ", st->ssm.dim(0), " sequences, input has ", B);
  Arena::Scope scope(ctx.arena());
  const Workspace alloc(ctx, keep != nullptr);

  // [x | z] = u in_proj^T
  const Tensor xz = alloc({B, L, 2 * Di});
  ops::linear(ctx, {.x = x, .W = value(in_proj_), .bias = value(in_bias_), .y = xz});

  // u = SiLU(conv(x) + bias)
  const Tensor u = alloc({B, L, Di});
  ops::conv1d(ctx, {.in = xz.cols(0, Di), .weight = value(conv_), .bias = value(conv_bias_),
                    .state = st ? st->conv : Tensor(), .out = u, .silu = true});

  // [dt | B | C] = u x_proj^T, each RMS-normalised in FalconMamba (without
  // weights) and Jamba (with)
  const Tensor dbc = alloc({B, L, c.d_x_proj()});
  ops::linear(ctx, {.x = u, .W = value(x_proj_), .y = dbc});
  // The backward of the norms reads their inputs: kept apart when training.
  const Tensor dbc_raw = keep && c.bcdt_norm ? dbc.clone() : dbc;
  const Tensor dt_low = dbc.cols(0, R), Bm = dbc.cols(R, R + N), Cm = dbc.cols(R + N, R + 2 * N);
  if (c.bcdt_norm) {
    ops::rms_norm(ctx, {.x = dt_low, .w = value(dt_norm_), .eps = c.bcdt_eps, .out = dt_low});
    ops::rms_norm(ctx, {.x = Bm, .w = value(b_norm_), .eps = c.bcdt_eps, .out = Bm});
    ops::rms_norm(ctx, {.x = Cm, .w = value(c_norm_), .eps = c.bcdt_eps, .out = Cm});
  }

  // dt_raw = dt dt_proj^T; its bias goes in with the softplus of the scan
  const Tensor dt_raw = alloc({B, L, Di});
  ops::linear(ctx, {.x = dt_low, .W = value(dt_proj_), .y = dt_raw});

  // S = exp(dt A) S + dt u B,  y = (S C + D u) * SiLU(z)
  const Tensor ys = alloc({B, L, Di});
  ops::selective_scan(ctx, {.x = u, .dt_raw = dt_raw, .dt_bias = value(dt_bias_),
                            .A_log = value(A_log_), .B = Bm, .C = Cm, .D = value(D_),
                            .z = xz.cols(Di, 2 * Di), .y = ys, .state = st ? st->ssm : Tensor()});
  ops::linear(ctx, {.x = ys, .W = value(out_proj_), .bias = value(out_bias_), .y = y});
  if (keep) {
    auto a = std::make_unique<Mamba1Activations>();
    a->xz = xz, a->u = u, a->dbc_raw = dbc_raw, a->dbc = dbc, a->dt_raw = dt_raw, a->ys = ys;
    *keep = std::move(a);
  }
}

}  // namespace ssm
