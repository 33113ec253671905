#include "ssm/layers/gated_mlp.h"

#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

// fc1's output [a | gate] and the gated product a * SiLU(gate).
struct MlpActivations : LayerActivations {
  Tensor h, gated;
};

GatedMlp::GatedMlp(int64_t d_model, int64_t hidden, bool hf_layout) : hidden_(hidden), hf_(hf_layout) {
  if (hf_) {
    add_param("gate_proj.weight", {hidden, d_model});
    add_param("up_proj.weight", {hidden, d_model});
    add_param("down_proj.weight", {d_model, hidden});
    gate_ = &param("gate_proj.weight");
    up_ = &param("up_proj.weight");
    fc2_ = &param("down_proj.weight");
    return;
  }
  add_param("fc1.weight", {2 * hidden, d_model});
  add_param("fc2.weight", {d_model, hidden});
  fc1_ = &param("fc1.weight");
  fc2_ = &param("fc2.weight");
}

void GatedMlp::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx,
                       std::unique_ptr<LayerActivations>* keep) {
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);
  const Shape rows = x.ndim() == 3 ? Shape{x.dim(0), x.dim(1)} : Shape{x.dim(0)};
  Shape wide = rows, narrow = rows;
  wide.push_back(2 * hidden_);
  narrow.push_back(hidden_);
  const Tensor h = work(wide);
  if (hf_) {
    ops::linear(ctx, {.x = x, .W = value(up_), .y = h.cols(0, hidden_)});
    ops::linear(ctx, {.x = x, .W = value(gate_), .y = h.cols(hidden_, 2 * hidden_)});
  } else {
    ops::linear(ctx, {.x = x, .W = value(fc1_), .y = h});
  }
  if (gate_multiplier_ != 1.f) ops::scale(ctx, h.cols(hidden_, 2 * hidden_), gate_multiplier_);
  // a * SiLU(gate): the gate without a norm; over `a` in place while inferring.
  const Tensor gated = keep ? work(narrow) : h.cols(0, hidden_);
  ops::gated_rms_norm(ctx, {.y = h.cols(0, hidden_), .z = h.cols(hidden_, 2 * hidden_), .out = gated});
  ops::linear(ctx, {.x = gated, .W = value(fc2_), .y = y});
  if (down_multiplier_ != 1.f) ops::scale(ctx, y, down_multiplier_);
  if (keep) {
    auto a = std::make_unique<MlpActivations>();
    a->h = h, a->gated = gated;
    *keep = std::move(a);
  }
}

void GatedMlp::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                        Tensor& dx, std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const MlpActivations&>(kept);
  Arena::Scope scope(ctx.arena());
  // y = m_down (gated fc2^T): the multiplier goes on the output's gradient.
  Tensor dout = dy;
  if (down_multiplier_ != 1.f) {
    dout = ctx.arena().alloc(DType::kF32, dy.shape());
    ops::copy(ctx, dout, dy);
    ops::scale(ctx, dout, down_multiplier_);
  }
  const Tensor dgated = ctx.arena().alloc(DType::kF32, a.gated.shape());
  ops::linear_backward(ctx, {.x = a.gated, .W = value(fc2_), .dy = dout, .dx = dgated,
                             .dW = grad(grads, fc2_)});
  const Tensor dh = ctx.arena().alloc(DType::kF32, a.h.shape());
  ops::gated_rms_norm_backward(ctx, {.y = a.h.cols(0, hidden_), .z = a.h.cols(hidden_, 2 * hidden_),
                                     .dout = dgated, .dy = dh.cols(0, hidden_),
                                     .dz = dh.cols(hidden_, 2 * hidden_)});
  // The kept gate is already times m_gate: its gradient is, before fc1's.
  if (gate_multiplier_ != 1.f) ops::scale(ctx, dh.cols(hidden_, 2 * hidden_), gate_multiplier_);
  if (!hf_) {
    ops::linear_backward(ctx, {.x = x, .W = value(fc1_), .dy = dh, .dx = dx, .dW = grad(grads, fc1_)});
    return;
  }
  ops::linear_backward(ctx, {.x = x, .W = value(up_), .dy = dh.cols(0, hidden_), .dx = dx,
                             .dW = grad(grads, up_)});
  ops::linear_backward(ctx, {.x = x, .W = value(gate_), .dy = dh.cols(hidden_, 2 * hidden_), .dx = dx,
                             .accumulate_dx = true, .dW = grad(grads, gate_)});
}

}  // namespace ssm
