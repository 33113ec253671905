#include "ssm/layers/moe_mlp.h"

#include "ssm/ops/linear.h"
#include "ssm/ops/moe.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

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
  if (keep) throw Error("the moe layer has no backward: this model cannot be trained yet");
  const auto& c = cfg_;
  const int64_t T = x.numel() / c.d_model;
  const Tensor u = x.reshape({T, c.d_model}), out = y.reshape({T, c.d_model});
  Arena::Scope scope(ctx.arena());
  if (c.experts > 0) {
    const Tensor logits = ctx.arena().alloc(DType::kF32, {T, c.experts});
    ops::linear(ctx, {.x = u, .W = value(router_), .y = logits});
    // The experts chosen per token are scheduling data: on the host.
    const Tensor idx = ctx.device().is_host() ? ctx.arena().alloc(DType::kI64, {T, c.top_k})
                                              : Tensor::empty(DType::kI64, {T, c.top_k});
    const Tensor w = ctx.arena().alloc(DType::kF32, {T, c.top_k});
    ops::moe_route(ctx, {.router = ops::Router::kTopkSoftmax, .k = c.top_k, .logits = logits,
                         .idx = idx, .weights = w});
    ops::routed_experts(ctx, {.activation = ops::ExpertActivation::kSiluGated, .x = u, .idx = idx,
                              .weights = w, .w1 = value(w1_), .w2 = value(w2_), .out = out});
  }
  if (c.shared_hidden > 0) {
    const int64_t S = c.shared_hidden;
    const Tensor h = ctx.arena().alloc(DType::kF32, {T, 2 * S});
    ops::linear(ctx, {.x = u, .W = value(shared_in_), .y = h});
    // [gate | value]: value * SiLU(gate), in place over the value half.
    ops::gated_rms_norm(ctx, {.y = h.cols(S, 2 * S), .z = h.cols(0, S), .out = h.cols(S, 2 * S)});
    ops::linear(ctx, {.x = h.cols(S, 2 * S), .W = value(shared_out_), .y = out, .accumulate = c.experts > 0});
  }
}

}  // namespace ssm
