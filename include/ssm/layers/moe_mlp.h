// The mixture-of-experts MLP sub-block of Granite 4.0-H (HF's layout):
// a softmax-over-top-k router, routed experts with SiLU-gated projections
// (gate first), plus an always-on shared expert of the same form:
//   out = sum_j w_j expert_{e_j}(u) + shared(u)
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {


class MoeMlp : public SequenceLayer {
 public:
  explicit MoeMlp(const MoeConfig& config);
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
  MoeConfig cfg_;
  Param *router_ = nullptr, *w1_ = nullptr, *w2_ = nullptr, *shared_in_ = nullptr, *shared_out_ = nullptr;
};

}  // namespace ssm
