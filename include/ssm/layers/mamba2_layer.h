// The Mamba-2 mixer (SPEC §3).
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"
#include "ssm/ops/mamba2_decode.h"

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
  std::unique_ptr<LayerState> make_state(int64_t batch,
                                         Device device = Device::host()) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  // The out projection adds into h (LinearArgs::accumulate).
  void forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx) override;
  // A decode step normalises inside the in projection (ops::norm_linear).
  void forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps, const Tensor& normed,
                          LayerState* state, Context& ctx) override;
  bool can_train() const override { return true; }
  std::vector<TrainableSlice> trainable_parameters() override;
  const Mamba2Config& config() const { return cfg_; }
  // This layer's decode step under the block's RMSNorm (norm_weight) as a
  // layer of ops::mamba2_decode_stack, with its state; false where the step
  // is not that op's (multipliers, no state of this layer's).
  bool decode_stack_layer(const Tensor& norm_weight, LayerState* state, ops::Mamba2StackLayer& out) const;

 private:
  // forward, with y += the output instead of y = when add_to_y.
  void run(const Tensor& x, const Tensor& y, bool add_to_y, LayerState* state, Context& ctx,
           std::unique_ptr<LayerActivations>* keep);
  // Whether run takes x (B, L, D) with this state as a fused decode step.
  bool fused_step(const Tensor& x, LayerState* state, Context& ctx) const;
  // The fused decode step: y (+)= forward(norm ? RMSNorm(x) : x).
  void run_step(const Tensor& x, const Tensor& y, bool add_to_y, LayerState& state, Context& ctx,
                const InputNorm* norm);
  // zxbcdt = in_proj(x * in_multiplier), each block times its multiplier.
  void project_with_multipliers(const Tensor& x, const Tensor& zxbcdt, Context& ctx);
  // out = GroupRMSNorm(ys * SiLU(z)) * w, the forward's and (made again)
  // the backward's.
  void gated_norm(const Tensor& ys, const Tensor& z, const Tensor& out, Context& ctx) const;
  Mamba2Config cfg_;
  // Parameters by role, fixed once the list is built (null when absent).
  Param *in_proj_, *in_bias_, *conv_, *conv_bias_, *dt_bias_, *A_log_, *D_, *norm_, *out_proj_,
      *out_bias_;
};

}  // namespace ssm
