// The Mamba-3 mixer (SPEC §4): SISO or MIMO, trapezoidal recurrence with a
// data-dependent rotary phase, no convolution.
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

// Decode state of a batch of sequences, per head. A fresh state is all
// zeros: no phase, no SSM state and no previous k, v (SPEC §4).
struct Mamba3State : LayerState {
  Tensor phase;   // (B, H, S_ang): rotary phase accumulated so far
  Tensor ssm;     // (B, H, P, N)
  Tensor k_prev;  // (B, H, R, N): k of the last step (normed, biased, rotated)
  Tensor v_prev;  // (B, H, R, P): v of the last step (x * mimo_x)
  std::vector<std::pair<std::string, Tensor*>> tensors() override {
    return {{"phase", &phase}, {"ssm", &ssm}, {"k_prev", &k_prev}, {"v_prev", &v_prev}};
  }
};

class Mamba3Layer : public SequenceLayer {
 public:
  explicit Mamba3Layer(const Mamba3Config& config);
  std::string kind() const override { return "mamba3"; }
  std::unique_ptr<LayerState> make_state(int64_t batch) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) override;
  // The sequential scan on workspaces held by the layer: no allocation once
  // they have grown to the batch.
  void step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) override;
  std::vector<TrainableSlice> trainable_parameters() override;
  const Mamba3Config& config() const { return cfg_; }

  // Selects the sequential scan for prefill too (tests).
  void use_reference_scan(bool on) { reference_scan_ = on; }

 private:
  // Rows (batch x time) a forward call works on at once; longer inputs are
  // split in time.
  static constexpr int64_t kSegmentRows = 256;
  int64_t segment_length(int64_t batch) const;
  void run(const float* x, int64_t batch, int64_t length, float* y, Mamba3State& state,
           bool sequential, Context& ctx);

  Mamba3Config cfg_;
  bool reference_scan_ = false;
  // Parameters by role, fixed once the list is built (null when absent).
  Param *in_proj_ = nullptr, *out_proj_ = nullptr, *dt_bias_ = nullptr, *D_ = nullptr;
  Param *B_bias_ = nullptr, *C_bias_ = nullptr, *B_norm_ = nullptr, *C_norm_ = nullptr;
  Param *norm_ = nullptr, *mimo_x_ = nullptr, *mimo_z_ = nullptr, *mimo_o_ = nullptr;
  // Workspace, grown to the largest segment seen and then reused; after a
  // forward they hold the last segment's intermediates (see ops/mamba3_scan.h).
  Tensor proj_, bn_, cn_, rate_, dt_, A_, lam_, q_, k_, v_, o_, ys_;
  Tensor x_seg_, y_seg_;  // a time segment of a batch, gathered
};

}  // namespace ssm
