// Zamba2's shared transformer block, reused at several depths: the weights
// every use shares (SharedAttentionBlock), and one use of them with its own
// low-rank adapters, its own output projection and its own KV cache
// (SharedBlockUse, a layer of its own).
#pragma once

#include "ssm/layers/attention_layer.h"
#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

// The shared weights, named as HF's shared_transformer holds them.
class SharedAttentionBlock {
 public:
  explicit SharedAttentionBlock(const SharedBlockConfig& config);
  const SharedBlockConfig& config() const { return cfg_; }
  std::vector<Param>& parameters() { return params_; }
  // The rotary frequencies on the context's device (undefined without rotary).
  const Tensor& inv_freq(Context& ctx);

  Param *in_norm = nullptr, *ff_norm = nullptr, *gate_up = nullptr, *down = nullptr;
  Param *qkv[3] = {}, *o_proj = nullptr;

 private:
  SharedBlockConfig cfg_;
  std::vector<Param> params_;
  Tensor inv_freq_, inv_freq_on_device_;
};

// One use u of a shared block: x (B, L, 2D) is [h | embeddings], y (B, L, D)
//   n = RMSNorm(x),  [q | k | v] = n W^T + (n A_u^T) B_u^T  (per projection)
//   a = RMSNorm(attention(q, k, v) o_proj^T)
//   [g | v'] = a gate_up^T + (a A_u^T) B_u^T,   t = (GELU(g) * v') down^T
//   y = t linear_u^T
// The state is this use's KV cache. Its backward takes, after the gradients
// of its own parameters, those of the shared block's (block().parameters()
// order), which every use adds to.
class SharedBlockUse : public SequenceLayer {
 public:
  SharedBlockUse(SharedAttentionBlock& block, int64_t use);
  std::string kind() const override { return "shared_attention"; }
  std::unique_ptr<LayerState> make_state(int64_t batch,
                                         Device device = Device::host()) const override;
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }
  int64_t use() const { return use_; }
  SharedAttentionBlock& block() { return block_; }

 private:
  // y (+)= x W^T, plus the adapter's (x A^T) B^T where there is one.
  void project(const Tensor& x, const Param* W, const Param* A, const Param* B, const Tensor& y,
               Context& ctx) const;
  // Its backward: dx (+)= dy W + ((dy B) A), and the three weights' gradients.
  void project_backward(const Tensor& x, const Param* W, const Param* A, const Param* B,
                        const Tensor& dy, const Tensor& dx, bool accumulate_dx,
                        std::vector<Tensor>& grads, Context& ctx) const;
  // The gradient of a parameter of this use's or of the shared block's.
  Tensor grad_of(std::vector<Tensor>& grads, const Param* p) const;
  SharedAttentionBlock& block_;
  int64_t use_;
  Param *qkv_a_[3] = {}, *qkv_b_[3] = {}, *mlp_a_ = nullptr, *mlp_b_ = nullptr, *linear_ = nullptr;
};

}  // namespace ssm
