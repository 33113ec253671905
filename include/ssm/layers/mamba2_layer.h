// The Mamba-2 mixer (SPEC §3).
#pragma once

#include "ssm/layers/sequence_layer.h"
#include "ssm/layers/mixer_config.h"

namespace ssm {

struct Mamba2State : LayerState {
  Tensor conv;  // (B, K-1, conv_dim): the last K-1 conv inputs
  Tensor ssm;   // (B, H, P, N)
  std::vector<std::pair<std::string, Tensor*>> tensors() override {
    return {{"conv", &conv}, {"ssm", &ssm}};
  }
};

class Mamba2Layer : public SequenceLayer {
 public:
  explicit Mamba2Layer(const Mamba2Config& config);
  std::string kind() const override { return "mamba2"; }
  std::unique_ptr<LayerState> make_state(int64_t batch) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) override;
  // The recurrence for one token on the layer's workspaces: no allocation
  // once they have grown to the batch.
  void step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) override;
  std::vector<TrainableSlice> trainable_parameters() override;
  const Mamba2Config& config() const { return cfg_; }

  // Selects the sequential oracle instead of the chunked scan (tests).
  void use_reference_scan(bool on) { reference_scan_ = on; }

 private:
  Mamba2Config cfg_;
  bool reference_scan_ = false;
  // Workspace, grown to the largest (B * L) seen and then reused.
  Tensor zxbcdt_, xbc_, dt_, ys_;
  Tensor A_;  // (H) for step: -exp(A_log), recomputed per call (A_log may train)
};

}  // namespace ssm
