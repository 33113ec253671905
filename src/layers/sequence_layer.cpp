#include "ssm/layers/sequence_layer.h"

#include "ssm/ops/elementwise.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

void LayerState::zero(Context& ctx) {
  for (auto& [name, t] : tensors())
    if (t->numel()) ops::fill(ctx, *t, 0.f);
}

void SequenceLayer::forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx) {
  Arena::Scope scope(ctx.arena());
  Tensor y = ctx.arena().alloc(DType::kF32, h.shape());
  forward(x, y, state, ctx);
  ops::add(ctx, h, y);
}

void SequenceLayer::forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps,
                                       const Tensor& normed, LayerState* state, Context& ctx) {
  ops::rms_norm(ctx, {.x = h, .w = norm_weight, .eps = eps, .out = normed});
  forward_add(normed, h, state, ctx);
}

void SequenceLayer::step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) {
  const Tensor x3 = x.reshape({x.dim(0), 1, x.dim(1)});
  Tensor y3 = y.reshape({y.dim(0), 1, y.dim(1)});
  forward(x3, y3, &state, ctx);
}

void SequenceLayer::backward(const LayerActivations&, const Tensor&, const Tensor&, Tensor&,
                             std::vector<Tensor>&, Context&) {
  throw Error(cat("the ", kind(), " layer cannot be trained"));
}

Param& SequenceLayer::param(const std::string& name) {
  for (Param& p : params_)
    if (p.name == name) return p;
  throw Error(cat(kind(), " layer has no parameter '", name, "'"));
}

const Param& SequenceLayer::param(const std::string& name) const {
  return const_cast<SequenceLayer*>(this)->param(name);
}

std::vector<TrainableSlice> SequenceLayer::trainable_parameters() {
  std::vector<TrainableSlice> out;
  if (wsla_) return out;  // layers without B/C projections freeze entirely
  for (Param& p : params_) out.push_back({&p, 0, p.shape.empty() ? 1 : p.shape[0]});
  return out;
}

Param& SequenceLayer::add_param(std::string name, Shape shape, ParamRole role) {
  params_.push_back(Param{std::move(name), shape, role, Tensor()});
  return params_.back();
}

const Tensor& SequenceLayer::value(const Param* p) {
  static const Tensor kAbsent;
  return p ? p->value : kAbsent;
}

Tensor SequenceLayer::grad(std::vector<Tensor>& grads, const Param* p) const {
  if (!p) return Tensor();
  const size_t i = static_cast<size_t>(p - params_.data());
  SSM_CHECK(i < params_.size() && i < grads.size(), kind(), ": parameter '", p->name,
            "' is not this layer's");
  const Tensor& g = grads[i];
  if (!g.defined() || g.numel() == 0) return Tensor();
  SSM_CHECK(g.shape() == p->shape, "gradient of ", p->name, " has shape ", g.shape(),
            ", parameter ", p->shape);
  return g;
}

Tensor Workspace::operator()(const Shape& shape, DType dtype) const {
  if (!keep_) return ctx_.arena().alloc(dtype, shape);
  if (ctx_.kept_arena().in_scope()) return ctx_.kept_arena().alloc(dtype, shape);
  return Tensor::empty(dtype, shape, ctx_.device());
}

Tensor Workspace::zeros(const Shape& shape, DType dtype) const {
  if (!keep_) return ctx_.arena().zeros(dtype, shape);
  if (ctx_.kept_arena().in_scope()) return ctx_.kept_arena().zeros(dtype, shape);
  return Tensor::zeros(dtype, shape, ctx_.device());
}

Tensor Workspace::copy(const Tensor& t) const {
  const Tensor out = (*this)(t.shape(), t.dtype());
  ops::copy(ctx_, out, t);
  return out;
}

}  // namespace ssm
