#include "ssm/layers/plain_mlp.h"

#include "ssm/ops/activation.h"
#include "ssm/ops/linear.h"

namespace ssm {

PlainMlp::PlainMlp(int64_t d_model, int64_t hidden) : hidden_(hidden) {
  add_param("up_proj.weight", {hidden, d_model});
  add_param("down_proj.weight", {d_model, hidden});
  up_ = &param("up_proj.weight");
  down_ = &param("down_proj.weight");
}

void PlainMlp::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx,
                       std::unique_ptr<LayerActivations>* keep) {
  if (keep) throw Error("the relu² mlp layer has no backward: this model cannot be trained yet");
  Arena::Scope scope(ctx.arena());
  Shape wide = x.shape();
  wide.back() = hidden_;
  const Tensor h = ctx.arena().alloc(DType::kF32, wide);
  ops::linear(ctx, {.x = x, .W = value(up_), .y = h});
  ops::relu_squared(ctx, h);
  ops::linear(ctx, {.x = h, .W = value(down_), .y = y});
}

}  // namespace ssm
