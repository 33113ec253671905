// Backward of one sequence layer, recomputing its internals from its input
// (layer-granularity recomputation: training keeps only each layer's input).
//
// For a layer y = f(x; params), given x (B, L, D) and dy = dLoss/dy (B, L, D):
//   dx    is overwritten with dLoss/dx (B, L, D, preallocated);
//   grads holds one F32 tensor per layer.parameters() entry, in that order,
//         each of the parameter's shape; gradients are ADDED to it. An empty
//         tensor (numel() == 0) means that parameter's gradient is not wanted.
// Sequences start from a zero state. One function per layer kind; add a new
// kind with a line in the table of src/train/layer_backward.cpp.
#pragma once

#include <vector>

#include "ssm/core/context.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

using LayerBackwardFn = void (*)(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                                 std::vector<Tensor>& grads, Context& ctx);

void backward_mamba2(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                     std::vector<Tensor>& grads, Context& ctx);
void backward_mlp(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                  std::vector<Tensor>& grads, Context& ctx);
void backward_mamba3(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                     std::vector<Tensor>& grads, Context& ctx);
void backward_attention(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                        std::vector<Tensor>& grads, Context& ctx);

// Dispatches on layer.kind(); ssm::Error for a kind without a backward.
void layer_backward(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                    std::vector<Tensor>& grads, Context& ctx);
bool has_layer_backward(const std::string& kind);

namespace detail {
// The gradient buffer of parameter `name` of layer, or null when unwanted.
float* grad_of(SequenceLayer& layer, std::vector<Tensor>& grads, const std::string& name);
}  // namespace detail

}  // namespace ssm
