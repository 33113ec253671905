#include "ssm/layers/sparse_moe.h"

#include "ssm/ops/activation.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/moe.h"

namespace ssm {

// The router's logits and choice, and the shared expert's up_proj output
// before and after relu².
struct SparseMoeActivations : LayerActivations {
  Tensor logits, idx, weights, shared_pre, shared_h;
};

SparseMoe::SparseMoe(const SparseMoeConfig& config) : cfg_(config) {
  const auto& c = cfg_;
  const bool nemotron = c.style == SparseMoeConfig::Style::kNemotronH;
  const std::string router = nemotron ? "gate." : "router.";
  add_param(router + "weight", {c.experts, c.d_model});
  if (nemotron) add_param("gate.e_score_correction_bias", {c.experts}, ParamRole::kNoDecay);
  // kNoDecay keeps them F32 under --dtype (and out of weight decay).
  for (int64_t e = 0; e < c.experts; ++e) {
    const std::string p = cat("experts.", e, ".");
    if (!nemotron) add_param(p + "gate_proj.weight", {c.expert_hidden, c.d_model}, ParamRole::kNoDecay);
    add_param(p + "up_proj.weight", {c.expert_hidden, c.d_model}, ParamRole::kNoDecay);
    add_param(p + "down_proj.weight", {c.d_model, c.expert_hidden}, ParamRole::kNoDecay);
  }
  if (c.shared_hidden > 0) {
    add_param("shared_experts.up_proj.weight", {c.shared_hidden, c.d_model});
    add_param("shared_experts.down_proj.weight", {c.d_model, c.shared_hidden});
  }
  // params_ no longer grows, so pointers into it stay valid.
  router_ = &param(router + "weight");
  if (nemotron) bias_ = &param("gate.e_score_correction_bias");
  for (int64_t e = 0; e < c.experts; ++e) {
    const std::string p = cat("experts.", e, ".");
    if (!nemotron) gate_.push_back(&param(p + "gate_proj.weight"));
    up_.push_back(&param(p + "up_proj.weight"));
    down_.push_back(&param(p + "down_proj.weight"));
  }
  gate_t_.resize(gate_.size());
  up_t_.resize(up_.size());
  down_t_.resize(down_.size());
  if (c.shared_hidden > 0) {
    shared_up_ = &param("shared_experts.up_proj.weight");
    shared_down_ = &param("shared_experts.down_proj.weight");
  }
}

void SparseMoe::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx,
                        std::unique_ptr<LayerActivations>* keep) {
  const auto& c = cfg_;
  const bool nemotron = c.style == SparseMoeConfig::Style::kNemotronH;
  const int64_t T = x.numel() / c.d_model;
  const Tensor u = x.reshape({T, c.d_model}), out = y.reshape({T, c.d_model});
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);
  const Tensor logits = work({T, c.experts});
  ops::linear(ctx, {.x = u, .W = value(router_), .y = logits});
  // The experts chosen per token are scheduling data: on the host.
  const Tensor idx = ctx.device().is_host() && !keep ? ctx.arena().alloc(DType::kI64, {T, c.top_k})
                                                     : Tensor::empty(DType::kI64, {T, c.top_k});
  const Tensor w = work({T, c.top_k});
  if (nemotron) {
    ops::moe_route(ctx, {.router = ops::Router::kSigmoidBiased, .k = c.top_k, .logits = logits,
                         .bias = value(bias_), .normalize = c.normalize, .scale = c.scale,
                         .n_group = c.n_group, .topk_group = c.topk_group, .idx = idx, .weights = w});
  } else {
    ops::moe_route(ctx, {.router = ops::Router::kSoftmaxTopk, .k = c.top_k, .logits = logits,
                         .idx = idx, .weights = w});
  }
  for (size_t e = 0; e < gate_.size(); ++e) gate_t_[e] = value(gate_[e]);
  for (size_t e = 0; e < up_.size(); ++e) up_t_[e] = value(up_[e]), down_t_[e] = value(down_[e]);
  ops::routed_experts(ctx, {.activation = nemotron ? ops::ExpertActivation::kRelu2
                                                   : ops::ExpertActivation::kSiluGated,
                            .x = u, .idx = idx, .weights = w, .gate = gate_t_, .up = up_t_,
                            .down = down_t_, .out = out});
  auto a = keep ? std::make_unique<SparseMoeActivations>() : nullptr;
  if (a) a->logits = logits, a->idx = idx, a->weights = w;
  if (c.shared_hidden > 0) {
    const Tensor h = work({T, c.shared_hidden});
    ops::linear(ctx, {.x = u, .W = value(shared_up_), .y = h});
    if (a) a->shared_pre = h.clone(), a->shared_h = h;
    ops::relu_squared(ctx, h);
    ops::linear(ctx, {.x = h, .W = value(shared_down_), .y = out, .accumulate = true});
  }
  if (keep) *keep = std::move(a);
}

void SparseMoe::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                         std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const SparseMoeActivations&>(kept);
  const auto& c = cfg_;
  const bool nemotron = c.style == SparseMoeConfig::Style::kNemotronH;
  const int64_t T = x.numel() / c.d_model;
  const Tensor u = x.reshape({T, c.d_model}), dout = dy.reshape({T, c.d_model});
  const Tensor du = dx.reshape({T, c.d_model});
  Arena::Scope scope(ctx.arena());
  for (size_t e = 0; e < gate_.size(); ++e) gate_t_[e] = value(gate_[e]);
  for (size_t e = 0; e < up_.size(); ++e) up_t_[e] = value(up_[e]), down_t_[e] = value(down_[e]);
  // The experts' gradients, all of them or (none wanted) none.
  std::vector<Tensor> dgate, dup, ddown;
  if (grad(grads, down_.front()).defined()) {
    for (Param* p : gate_) dgate.push_back(grad(grads, p));
    for (Param* p : up_) dup.push_back(grad(grads, p));
    for (Param* p : down_) ddown.push_back(grad(grads, p));
  }
  const Tensor dw = ctx.arena().alloc(DType::kF32, {T, c.top_k});
  ops::routed_experts_backward(ctx, {.fwd = {.activation = nemotron ? ops::ExpertActivation::kRelu2
                                                                    : ops::ExpertActivation::kSiluGated,
                                             .x = u, .idx = a.idx, .weights = a.weights, .gate = gate_t_,
                                             .up = up_t_, .down = down_t_},
                                     .dout = dout, .dx = du, .dweights = dw, .dgate = dgate, .dup = dup,
                                     .ddown = ddown});
  // The selection bias only chooses: it has no gradient.
  const Tensor dlogits = ctx.arena().alloc(DType::kF32, {T, c.experts});
  ops::moe_route_backward(ctx, {.router = nemotron ? ops::Router::kSigmoidBiased : ops::Router::kSoftmaxTopk,
                                .normalize = c.normalize, .scale = nemotron ? c.scale : 1.f,
                                .logits = a.logits, .idx = a.idx, .dweights = dw, .dlogits = dlogits});
  ops::linear_backward(ctx, {.x = u, .W = value(router_), .dy = dlogits, .dx = du, .accumulate_dx = true,
                             .dW = grad(grads, router_)});
  if (c.shared_hidden > 0) {
    const Tensor dh = ctx.arena().alloc(DType::kF32, a.shared_h.shape());
    ops::linear_backward(ctx, {.x = a.shared_h, .W = value(shared_down_), .dy = dout, .dx = dh,
                               .dW = grad(grads, shared_down_)});
    ops::relu_squared_backward(ctx, a.shared_pre, dh);
    ops::linear_backward(ctx, {.x = u, .W = value(shared_up_), .dy = dh, .dx = du, .accumulate_dx = true,
                               .dW = grad(grads, shared_up_)});
  }
}

}  // namespace ssm
