// The Mamba-3 mixer (SPEC §4): SISO or MIMO, trapezoidal recurrence with a
// data-dependent rotary phase, no convolution.
#pragma once

#include <utility>

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"
#include "ssm/ops/mamba3.h"

namespace ssm {

// Decode state of a batch of sequences, per head. A fresh state is all
// zeros: no phase, no SSM state and no previous k, v (SPEC §4).
struct Mamba3State : LayerState {
  Tensor phase;   // (B, H, S): rotary phase accumulated so far
  Tensor ssm;     // (B, H, P, N)
  Tensor k_prev;  // (B, H, R, N): k of the last step (normed, biased, rotated)
  Tensor v_prev;  // (B, H, R, P): v of the last step (x * mimo_x)
  std::vector<std::pair<std::string, Tensor*>> tensors() override {
    return {{"phase", &phase}, {"ssm", &ssm}, {"k_prev", &k_prev}, {"v_prev", &v_prev}};
  }
};

struct Mamba3Activations;

class Mamba3Layer : public SequenceLayer {
 public:
  explicit Mamba3Layer(const Mamba3Config& config);
  std::string kind() const override { return "mamba3"; }
  std::unique_ptr<LayerState> make_state(int64_t batch,
                                         Device device = Device::host()) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  // The out projection adds into h (LinearArgs::accumulate) when the input
  // runs in one piece.
  void forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx) override;
  // A decode step normalises inside the in projection (ops::norm_linear).
  void forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps, const Tensor& normed,
                          LayerState* state, Context& ctx) override;
  bool can_train() const override { return true; }
  std::vector<TrainableSlice> trainable_parameters() override;
  const Mamba3Config& config() const { return cfg_; }

 private:
  // Time steps an inference call runs at once, from the backend's
  // Backend::sequence_segment_rows (0: the whole input of length L).
  int64_t segment_length(int64_t batch, int64_t L, const Context& ctx) const;
  // y = the mixer of x, or y += it when add_to_y; x normalised inside the
  // in projection first when norm is given (nothing kept then).
  void run(const Tensor& x, const Tensor& y, Mamba3State* state, Context& ctx,
           Mamba3Activations* keep, bool add_to_y = false, const InputNorm* norm = nullptr);
  // p with every output of the prepare op allocated from work (the
  // per-step phases only when asked: the backward's).
  ops::Mamba3PrepareArgs with_prepare_outputs(ops::Mamba3PrepareArgs p, const Workspace& work,
                                              bool phases) const;
  // The prepare op run again over the kept inputs, its outputs in the
  // context's arena, and the scan's arguments reading them: the forward's,
  // bit for bit.
  std::pair<ops::Mamba3PrepareArgs, ops::Mamba3ScanArgs> prepare_again(const Mamba3Activations& a,
                                                                       Context& ctx) const;

  Mamba3Config cfg_;
  // Parameters by role, fixed once the list is built (null when absent).
  Param *in_proj_ = nullptr, *out_proj_ = nullptr, *dt_bias_ = nullptr, *D_ = nullptr;
  Param *B_bias_ = nullptr, *C_bias_ = nullptr, *B_norm_ = nullptr, *C_norm_ = nullptr;
  Param *norm_ = nullptr, *mimo_x_ = nullptr, *mimo_z_ = nullptr, *mimo_o_ = nullptr;
};

}  // namespace ssm
