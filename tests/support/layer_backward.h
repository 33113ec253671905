// A layer's backward as training runs it: the forward keeps its
// activations, then the backward reverses them.
#pragma once

#include <memory>
#include <vector>

#include "ssm/layers/sequence_layer.h"

namespace ssm::testing {

inline void run_layer_backward(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                               std::vector<Tensor>& grads, Context& ctx) {
  std::unique_ptr<LayerActivations> kept;
  Tensor y = Tensor::empty(DType::kF32, x.shape(), ctx.device());
  layer.forward(x, y, nullptr, ctx, &kept);
  layer.backward(*kept, x, dy, dx, grads, ctx);
}

}  // namespace ssm::testing
