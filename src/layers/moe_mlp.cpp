#include "ssm/layers/moe_mlp.h"

#include "ssm/ops/linear.h"
#include "ssm/ops/moe.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

// The router's logits and choice, and the shared expert's [gate | value]
// and gated product.
struct MoeActivations : LayerActivations {
  Tensor logits, idx, weights, shared_h, shared_gated;
};

MoeMlp::MoeMlp(const MoeConfig& config) : cfg_(config) {
  const auto& c = cfg_;
  if (c.experts > 0) {
    add_param("block_sparse_moe.router.layer.weight", {c.experts, c.d_model});
    add_param("block_sparse_moe.input_linear.weight", {c.experts, 2 * c.expert_hidden, c.d_model});
    add_param("block_sparse_moe.output_linear.weight", {c.experts, c.d_model, c.expert_hidden});
  }
  if (c.shared_hidden > 0) {
    add_param("shared_mlp.input_linear.weight", {2 * c.shared_hidden, c.d_model});
    add_param("shared_mlp.output_linear.weight", {c.d_model, c.shared_hidden});
  }
  if (c.experts > 0) {
    router_ = &param("block_sparse_moe.router.layer.weight");
    w1_ = &param("block_sparse_moe.input_linear.weight");
    w2_ = &param("block_sparse_moe.output_linear.weight");
  }
  if (c.shared_hidden > 0) {
    shared_in_ = &param("shared_mlp.input_linear.weight");
    shared_out_ = &param("shared_mlp.output_linear.weight");
  }
}

void MoeMlp::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx,
                     std::unique_ptr<LayerActivations>* keep) {
  const auto& c = cfg_;
  const int64_t T = x.numel() / c.d_model;
  const Tensor u = x.reshape({T, c.d_model}), out = y.reshape({T, c.d_model});
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);
  auto a = keep ? std::make_unique<MoeActivations>() : nullptr;
  if (c.experts > 0) {
    const Tensor logits = work({T, c.experts});
    ops::linear(ctx, {.x = u, .W = value(router_), .y = logits});
    // The experts chosen per token are scheduling data: on the host.
    const Tensor idx = ctx.device().is_host() && !keep ? ctx.arena().alloc(DType::kI64, {T, c.top_k})
                                                       : Tensor::empty(DType::kI64, {T, c.top_k});
    const Tensor w = work({T, c.top_k});
    if (a) a->logits = logits, a->idx = idx, a->weights = w;
    ops::moe_route(ctx, {.router = ops::Router::kTopkSoftmax, .k = c.top_k, .logits = logits,
                         .idx = idx, .weights = w});
    ops::routed_experts(ctx, {.activation = ops::ExpertActivation::kSiluGated, .x = u, .idx = idx,
                              .weights = w, .w1 = value(w1_), .w2 = value(w2_), .out = out});
  }
  if (c.shared_hidden > 0) {
    const int64_t S = c.shared_hidden;
    const Tensor h = work({T, 2 * S});
    ops::linear(ctx, {.x = u, .W = value(shared_in_), .y = h});
    // [gate | value]: value * SiLU(gate), in place over the value half
    // while inferring.
    const Tensor gated = keep ? work({T, S}) : h.cols(S, 2 * S);
    ops::gated_rms_norm(ctx, {.y = h.cols(S, 2 * S), .z = h.cols(0, S), .out = gated});
    ops::linear(ctx, {.x = gated, .W = value(shared_out_), .y = out, .accumulate = c.experts > 0});
    if (a) a->shared_h = h, a->shared_gated = gated;
  }
  if (keep) *keep = std::move(a);
}

void MoeMlp::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                      std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const MoeActivations&>(kept);
  const auto& c = cfg_;
  const int64_t T = x.numel() / c.d_model;
  const Tensor u = x.reshape({T, c.d_model}), dout = dy.reshape({T, c.d_model});
  const Tensor du = dx.reshape({T, c.d_model});
  Arena::Scope scope(ctx.arena());
  if (c.experts > 0) {
    const Tensor dw = ctx.arena().alloc(DType::kF32, {T, c.top_k});
    ops::routed_experts_backward(ctx, {.fwd = {.activation = ops::ExpertActivation::kSiluGated, .x = u,
                                               .idx = a.idx, .weights = a.weights, .w1 = value(w1_),
                                               .w2 = value(w2_)},
                                       .dout = dout, .dx = du, .dweights = dw,
                                       .dw1 = grad(grads, w1_), .dw2 = grad(grads, w2_)});
    const Tensor dlogits = ctx.arena().alloc(DType::kF32, {T, c.experts});
    ops::moe_route_backward(ctx, {.router = ops::Router::kTopkSoftmax, .logits = a.logits, .idx = a.idx,
                                  .dweights = dw, .dlogits = dlogits});
    ops::linear_backward(ctx, {.x = u, .W = value(router_), .dy = dlogits, .dx = du, .accumulate_dx = true,
                               .dW = grad(grads, router_)});
  }
  if (c.shared_hidden > 0) {
    const int64_t S = c.shared_hidden;
    const Tensor dgated = ctx.arena().alloc(DType::kF32, {T, S}), dh = ctx.arena().alloc(DType::kF32, {T, 2 * S});
    ops::linear_backward(ctx, {.x = a.shared_gated, .W = value(shared_out_), .dy = dout, .dx = dgated,
                               .dW = grad(grads, shared_out_)});
    ops::gated_rms_norm_backward(ctx, {.y = a.shared_h.cols(S, 2 * S), .z = a.shared_h.cols(0, S),
                                       .dout = dgated, .dy = dh.cols(S, 2 * S), .dz = dh.cols(0, S)});
    ops::linear_backward(ctx, {.x = u, .W = value(shared_in_), .dy = dh, .dx = du,
                               .accumulate_dx = c.experts > 0, .dW = grad(grads, shared_in_)});
  }
}

}  // namespace ssm
