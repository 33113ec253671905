// The attention mixer of hybrid models (SPEC §5): grouped-query heads,
// causal softmax, optional rotary, a KV cache as decode state.
#pragma once

#include "ssm/core/error.h"
#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

// KV cache of a batch of sequences, each with its own length, so that
// sequences of different lengths decode together. Rotary positions are the
// per-sequence lengths. A fresh (or zeroed) state is empty.
struct AttentionState : LayerState {
  Tensor k;        // (B, H_kv, capacity, head_dim); rows [0, lengths[b]) valid
  Tensor v;        // (B, H_kv, capacity, head_dim)
  Tensor lengths;  // (B) I64 on the host: tokens cached per sequence
  // lengths' values on the device, set by a decode step that records or
  // replays a graph (LanguageModel::step) for the next forward only; not
  // part of the state (tensors() leaves it out).
  Tensor lengths_on_device;

  int64_t batch() const { return lengths.numel(); }
  int64_t capacity() const { return k.dim(2); }
  int64_t length(int64_t b) const { return lengths.data<int64_t>()[b]; }
  // Grows the capacity to at least max_len tokens per sequence, keeping the
  // cached rows; a decode loop that reserves first never allocates.
  void reserve(Context& ctx, int64_t max_len);
  // Room for `extra` more tokens in every sequence, growing geometrically.
  void ensure_room(Context& ctx, int64_t extra);
  void zero(Context& ctx) override;

  // The cache a forward call over L tokens appends to: `state`'s, with room
  // made for them, or without a state `fresh`, given tensors from `alloc`
  // (a Shape -> Tensor callable) for this call's tokens only.
  template <class Alloc>
  static AttentionState* for_call(LayerState* state, AttentionState& fresh, Context& ctx, int64_t B,
                                  int64_t L, int64_t heads_kv, int64_t head_dim, Alloc&& alloc) {
    auto* st = static_cast<AttentionState*>(state);
    if (st) {
      SSM_CHECK(st->batch() == B, "state holds ", st->batch(), " sequences, input has ", B);
      st->ensure_room(ctx, L);
      return st;
    }
    fresh.k = alloc(Shape{B, heads_kv, L, head_dim});
    fresh.v = alloc(Shape{B, heads_kv, L, head_dim});
    fresh.lengths = Tensor::zeros(DType::kI64, {B});
    return &fresh;
  }

  std::vector<std::pair<std::string, Tensor*>> tensors() override {
    return {{"k", &k}, {"v", &v}, {"lengths", &lengths}};
  }
};

class AttentionLayer : public SequenceLayer {
 public:
  explicit AttentionLayer(const AttentionConfig& config);
  std::string kind() const override { return "attention"; }
  std::unique_ptr<LayerState> make_state(int64_t batch,
                                         Device device = Device::host()) const override;
  // With a state, x continues each sequence after its cached tokens.
  void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
               std::unique_ptr<LayerActivations>* keep = nullptr) override;
  void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                std::vector<Tensor>& grads, Context& ctx) override;
  bool can_train() const override { return true; }
  const AttentionConfig& config() const { return cfg_; }

 private:
  // The rotary frequencies on the context's device (undefined without rotary).
  const Tensor& inv_freq(Context& ctx);

  AttentionConfig cfg_;
  float scale_ = 1.f;
  // [q | k | v] = x in_proj^T (+ bias), from one or three projections.
  void project_qkv(const Tensor& x, const Tensor& qkv, Context& ctx);
  void project_qkv_backward(const Tensor& x, const Tensor& dqkv, Tensor& dx,
                            std::vector<Tensor>& grads, Context& ctx);
  Param *in_proj_ = nullptr, *in_bias_ = nullptr, *out_proj_ = nullptr, *out_bias_ = nullptr;
  // split_projections: q, k, v weights and biases (in_proj_/in_bias_ unused).
  Param *qkv_w_[3] = {}, *qkv_b_[3] = {};
  Tensor inv_freq_;  // host, rotary_emb_dim / 2
  Tensor inv_freq_on_device_;
};

}  // namespace ssm
