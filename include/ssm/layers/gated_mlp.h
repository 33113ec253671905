// The gated MLP sub-block of hybrid models (SPEC §5):
//   [a | gate] = u fc1^T,   out = (a * SiLU(gate)) fc2^T
// or in HF's layout (SwiGLU): a = u up_proj^T, gate = u gate_proj^T,
// out = (a * SiLU(gate)) down_proj^T, each projection writing its column
// block of the same [a | gate] rows.
#pragma once

#include "ssm/layers/sequence_layer.h"

namespace ssm {

class GatedMlp : public SequenceLayer {
 public:
  GatedMlp(int64_t d_model, int64_t hidden, bool hf_layout = false);
  std::string kind() const override { return "mlp"; }
  std::unique_ptr<LayerState> make_state(int64_t, Device = Device::host()) const override {
    return nullptr;
  }
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }
  // Falcon-H1: SiLU(gate * gate_multiplier), and the output times down_multiplier.
  void set_multipliers(float gate, float down) {
    gate_multiplier_ = gate;
    down_multiplier_ = down;
  }

 private:
  float gate_multiplier_ = 1.f, down_multiplier_ = 1.f;
  int64_t hidden_;
  bool hf_ = false;
  Param *fc1_ = nullptr, *fc2_ = nullptr;  // fc2_ is down_proj in HF's layout
  Param *up_ = nullptr, *gate_ = nullptr;  // HF's layout only
};

}  // namespace ssm
