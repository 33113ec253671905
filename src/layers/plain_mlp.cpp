#include "ssm/layers/plain_mlp.h"

#include "ssm/ops/activation.h"
#include "ssm/ops/linear.h"

namespace ssm {

// up_proj's output before and after relu².
struct PlainMlpActivations : LayerActivations {
  Tensor pre, h;
};

PlainMlp::PlainMlp(int64_t d_model, int64_t hidden) : hidden_(hidden) {
  add_param("up_proj.weight", {hidden, d_model});
  add_param("down_proj.weight", {d_model, hidden});
  up_ = &param("up_proj.weight");
  down_ = &param("down_proj.weight");
}

void PlainMlp::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx,
                       std::unique_ptr<LayerActivations>* keep) {
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);
  Shape wide = x.shape();
  wide.back() = hidden_;
  const Tensor h = work(wide);
  ops::linear(ctx, {.x = x, .W = value(up_), .y = h});
  const Tensor pre = keep ? h.clone() : h;
  ops::relu_squared(ctx, h);
  ops::linear(ctx, {.x = h, .W = value(down_), .y = y});
  if (keep) {
    auto a = std::make_unique<PlainMlpActivations>();
    a->pre = pre, a->h = h;
    *keep = std::move(a);
  }
}

void PlainMlp::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                        std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const PlainMlpActivations&>(kept);
  Arena::Scope scope(ctx.arena());
  const Tensor dh = ctx.arena().alloc(DType::kF32, a.h.shape());
  ops::linear_backward(ctx, {.x = a.h, .W = value(down_), .dy = dy, .dx = dh, .dW = grad(grads, down_)});
  ops::relu_squared_backward(ctx, a.pre, dh);
  ops::linear_backward(ctx, {.x = x, .W = value(up_), .dy = dh, .dx = dx, .dW = grad(grads, up_)});
}

}  // namespace ssm
