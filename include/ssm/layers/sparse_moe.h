// A mixture-of-experts MLP with each expert's projections stored as tensors
// of their own, under HF's names (docs/MATH.md, "Mixture of experts"):
//   Nemotron-H (a layer of its own): gate.weight, gate.e_score_correction_bias,
//     experts.<e>.{up,down}_proj.weight, shared_experts.{up,down}_proj.weight
//     out = sum_j w_j down_e(relu(up_e u)^2) + down_s(relu(up_s u)^2)
//   Jamba (the MLP sub-block): router.weight, experts.<e>.{gate,up,down}_proj.weight
//     out = sum_j w_j down_e(SiLU(gate_e u) * up_e u)
// The expert weights stay F32 under --dtype (kept out of the projection
// conversion, as Granite's stacked experts are): routed_experts takes F32.
#pragma once

#include <vector>

#include "ssm/layers/sequence_layer.h"
#include "ssm/layers/sparse_moe_config.h"

namespace ssm {

class SparseMoe : public SequenceLayer {
 public:
  explicit SparseMoe(const SparseMoeConfig& config);
  std::string kind() const override { return "moe"; }
  std::unique_ptr<LayerState> make_state(int64_t, Device = Device::host()) const override {
    return nullptr;
  }
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }

 private:
  SparseMoeConfig cfg_;
  Param *router_ = nullptr, *bias_ = nullptr, *shared_up_ = nullptr, *shared_down_ = nullptr;
  std::vector<Param*> gate_, up_, down_;
  // The experts' tensors as the op takes them, refreshed each call into
  // slots sized once (a decoding step allocates nothing).
  std::vector<Tensor> gate_t_, up_t_, down_t_;
};

}  // namespace ssm
