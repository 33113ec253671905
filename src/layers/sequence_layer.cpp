#include "ssm/layers/sequence_layer.h"

#include <cstring>

namespace ssm {

void LayerState::zero() {
  for (auto& [name, t] : tensors())
    if (t->numel()) std::memset(t->raw(), 0, t->nbytes());
}

void SequenceLayer::step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) {
  const Tensor x3 = x.reshape({x.dim(0), 1, x.dim(1)});
  Tensor y3 = y.reshape({y.dim(0), 1, y.dim(1)});
  forward(x3, y3, &state, ctx);
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
  params_.push_back(Param{std::move(name), std::move(shape), role, Tensor()});
  return params_.back();
}

}  // namespace ssm
