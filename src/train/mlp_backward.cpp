// Backward of the gated MLP (SPEC §5): [a | gate] = u fc1^T,
// out = (a * SiLU(gate)) fc2^T.
#include "ssm/layers/gated_mlp.h"
#include "ssm/ops/gemm.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/activations_backward.h"
#include "ssm/train/ops/linear_backward.h"

namespace ssm {

void backward_mlp(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                  std::vector<Tensor>& grads, Context& ctx) {
  ThreadPool& pool = ctx.pool();
  const Param& fc1 = layer.param("fc1.weight");
  const Param& fc2 = layer.param("fc2.weight");
  const int64_t D = fc1.shape[1], width = fc1.shape[0], hidden = width / 2;
  const int64_t rows = x.numel() / D;
  const float* u = x.data<float>();

  Tensor h = Tensor::empty(DType::kF32, {rows, width});
  Tensor m = Tensor::empty(DType::kF32, {rows, hidden});
  Tensor dh = Tensor::empty(DType::kF32, {rows, width});
  ops::linear(u, rows, D, fc1.value.data<float>(), width, nullptr, h.data<float>(), pool);
  float* hp = h.data<float>();
  float* mp = m.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hidden; ++i)
      mp[r * hidden + i] = hp[r * width + i] * ops::silu(hp[r * width + hidden + i]);

  // dm lands in the first half of dh, then becomes [da | dgate] in place.
  float* dhp = dh.data<float>();
  ops::linear_backward({.M = rows, .K = hidden, .N = D, .x = mp, .W = fc2.value.data<float>(),
                        .dy = dy.data<float>(), .dx = dhp, .lddx = width,
                        .dW = detail::grad_of(layer, grads, "fc2.weight")},
                       pool);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hidden; ++i) {
      const float a = hp[r * width + i], gate = hp[r * width + hidden + i];
      const float dm = dhp[r * width + i];
      dhp[r * width + i] = dm * ops::silu(gate);
      dhp[r * width + hidden + i] = dm * a * ops::silu_grad(gate);
    }
  ops::linear_backward({.M = rows, .K = D, .N = width, .x = u, .W = fc1.value.data<float>(),
                        .dy = dhp, .dx = dx.data<float>(),
                        .dW = detail::grad_of(layer, grads, "fc1.weight")},
                       pool);
}

}  // namespace ssm
