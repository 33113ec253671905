// The Mamba-1 mixer (selective scan S6) of HF's MambaMixer and, with the
// weightless norms of dt, B and C, FalconMambaMixer, and with weighted ones
// JambaMambaMixer (docs/MATH.md).
// Its backward (mamba1_backward.cpp) reverses each op over what the forward
// kept.
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

struct Mamba1State : LayerState {
  Tensor conv;  // (B, K-1, d_inner): the last K-1 conv inputs
  Tensor ssm;   // (B, d_inner, N)
  std::vector<std::pair<std::string, Tensor*>> tensors() override {
    return {{"conv", &conv}, {"ssm", &ssm}};
  }
};

class Mamba1Layer : public SequenceLayer {
 public:
  explicit Mamba1Layer(const Mamba1Config& config);
  std::string kind() const override { return "mamba1"; }
  std::unique_ptr<LayerState> make_state(int64_t batch,
                                         Device device = Device::host()) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }
  const Mamba1Config& config() const { return cfg_; }

 private:
  Mamba1Config cfg_;
  Param *in_proj_, *in_bias_, *conv_, *conv_bias_, *x_proj_, *dt_proj_, *dt_bias_, *A_log_, *D_,
      *out_proj_, *out_bias_, *dt_norm_ = nullptr, *b_norm_ = nullptr, *c_norm_ = nullptr;
};

}  // namespace ssm
