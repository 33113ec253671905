// An MLP without a gate, HF's layout: out = act(u up_proj^T) down_proj^T,
// with act relu² (Nemotron-H's MLP layers).
#pragma once

#include "ssm/layers/sequence_layer.h"

namespace ssm {

class PlainMlp : public SequenceLayer {
 public:
  PlainMlp(int64_t d_model, int64_t hidden);
  std::string kind() const override { return "mlp"; }
  std::unique_ptr<LayerState> make_state(int64_t, Device = Device::host()) const override {
    return nullptr;
  }
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }

 private:
  int64_t hidden_;
  Param *up_, *down_;
};

}  // namespace ssm
