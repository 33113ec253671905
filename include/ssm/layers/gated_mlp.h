// The gated MLP sub-block of hybrid models (SPEC §5):
//   [a | gate] = u @ fc1^T,   out = (a * SiLU(gate)) @ fc2^T
#pragma once

#include "ssm/layers/sequence_layer.h"

namespace ssm {

class GatedMlp : public SequenceLayer {
 public:
  GatedMlp(int64_t d_model, int64_t hidden);
  std::string kind() const override { return "mlp"; }
  std::unique_ptr<LayerState> make_state(int64_t) const override { return nullptr; }
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) override;

 private:
  int64_t d_model_, hidden_;
  Tensor h_;  // workspace (rows, 2 * hidden)
};

}  // namespace ssm
