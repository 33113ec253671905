#include "ssm/train/layer_backward.h"

#include <utility>

namespace ssm {
namespace {

// The registry: one line per layer kind that can be trained.
constexpr std::pair<const char*, LayerBackwardFn> kBackwards[] = {
    {"mamba2", &backward_mamba2},
    {"mlp", &backward_mlp},
    {"mamba3", &backward_mamba3},
    {"attention", &backward_attention},
};

LayerBackwardFn find_backward(const std::string& kind) {
  for (const auto& [name, fn] : kBackwards)
    if (kind == name) return fn;
  return nullptr;
}

}  // namespace

bool has_layer_backward(const std::string& kind) { return find_backward(kind) != nullptr; }

void layer_backward(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                    std::vector<Tensor>& grads, Context& ctx) {
  const LayerBackwardFn fn = find_backward(layer.kind());
  if (!fn) throw Error(cat("backward for ", layer.kind(), " is not implemented yet"));
  SSM_CHECK(grads.size() == layer.parameters().size(), layer.kind(), ": ", grads.size(),
            " gradient tensors for ", layer.parameters().size(), " parameters");
  SSM_CHECK(x.shape() == dy.shape() && x.shape() == dx.shape(), "x ", shape_str(x.shape()), ", dy ",
            shape_str(dy.shape()), ", dx ", shape_str(dx.shape()));
  fn(layer, x, dy, dx, grads, ctx);
}

namespace detail {

float* grad_of(SequenceLayer& layer, std::vector<Tensor>& grads, const std::string& name) {
  const auto& params = layer.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) {
      if (grads[i].numel() == 0) return nullptr;
      SSM_CHECK(grads[i].shape() == params[i].shape, "gradient of ", name, " has shape ",
                shape_str(grads[i].shape()), ", parameter ", shape_str(params[i].shape));
      return grads[i].data<float>();
    }
  throw Error(cat(layer.kind(), " layer has no parameter '", name, "'"));
}

}  // namespace detail
}  // namespace ssm
