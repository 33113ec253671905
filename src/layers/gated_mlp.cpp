#include "ssm/layers/gated_mlp.h"

#include "ssm/ops/activations.h"
#include "ssm/ops/gemm.h"

namespace ssm {

GatedMlp::GatedMlp(int64_t d_model, int64_t hidden) : d_model_(d_model), hidden_(hidden) {
  add_param("fc1.weight", {2 * hidden, d_model});
  add_param("fc2.weight", {d_model, hidden});
}

void GatedMlp::forward(const Tensor& x, Tensor& y, LayerState*, Context& ctx) {
  const int64_t rows = x.numel() / d_model_, width = 2 * hidden_;
  if (!h_.defined() || h_.numel() < rows * width) h_ = Tensor::empty(DType::kF32, {rows, width});
  float* h = h_.data<float>();
  ops::linear(x.data<float>(), rows, d_model_, param("fc1.weight").value.data<float>(), width,
              nullptr, h, ctx.pool());
  // a * SiLU(gate), written over the first half of each row.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hidden_; ++i) h[r * width + i] *= ops::silu(h[r * width + hidden_ + i]);
  ops::linear(h, rows, hidden_, param("fc2.weight").value.data<float>(), d_model_, nullptr,
              y.data<float>(), ctx.pool(), width);
}

}  // namespace ssm
