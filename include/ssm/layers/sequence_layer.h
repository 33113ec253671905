// The interface every mixer and sub-block shares: forward over a batch of
// sequences carrying a recurrent state (one token is the same forward with
// L = 1), the backward of that forward, its parameters, the subset that
// trains and the WSLA fast-adapt switch.
//
// A layer is a short sequence of op calls (ops/) over weights it resolved
// once; it holds no arithmetic and no workspace of its own: intermediates
// come from the context's arena while inferring, and are kept, when asked,
// for the backward while training.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssm/layers/param.h"
#include "ssm/ops/context.h"

namespace ssm {

// A layer's recurrent state for a batch of sequences (conv rows, SSM state,
// KV cache, ...), exposed as named tensors for copying and saving. Every
// tensor is indexed by sequence first.
class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual std::vector<std::pair<std::string, Tensor*>> tensors() = 0;
  // Back to the state of fresh sequences.
  virtual void zero(Context& ctx);
};

// What a layer's forward kept for its backward (training); each layer kind
// defines its own.
class LayerActivations {
 public:
  virtual ~LayerActivations() = default;
};

class SequenceLayer {
 public:
  virtual ~SequenceLayer() = default;

  virtual std::string kind() const = 0;
  // A fresh state for `batch` sequences on `device`; null for stateless layers.
  virtual std::unique_ptr<LayerState> make_state(int64_t batch,
                                                 Device device = Device::host()) const = 0;

  // x (B, L, D) -> y (B, L, D), y preallocated. With a state, it is read as
  // the state before x[:, 0] and replaced by the state after x[:, L-1]; with
  // null, the sequences start fresh and the final state is dropped. With
  // keep, the intermediates the backward needs are left there (training:
  // no state, sequences start fresh).
  virtual void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                       std::unique_ptr<LayerActivations>* keep = nullptr) = 0;

  // h += forward(x), nothing kept: a block's residual update. The default
  // runs forward into a workspace and adds it; a layer whose last op is a
  // projection overrides it to add the product straight into h (the
  // product's epilogue), one pass over h fewer (a launch per layer when
  // decoding on a GPU).
  virtual void forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx);

  // h += forward(RMSNorm(h; norm_weight, eps)), nothing kept: a block's
  // whole update. The default normalises into `normed` (like h) and calls
  // forward_add; a layer whose first op is a projection may override it to
  // normalise inside the projection (ops::norm_linear: a launch fewer per
  // layer when decoding on a GPU).
  virtual void forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps,
                                  const Tensor& normed, LayerState* state, Context& ctx);

  // One token per sequence: x (B, D) -> y (B, D), state advanced in place.
  // The forward with L = 1; allocates nothing once the arena has grown.
  void step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx);

  // The backward of a forward that kept `kept`: x its input, dy the gradient
  // of its output; dx is overwritten with the gradient of x. grads holds one
  // tensor per parameters() entry, in that order, each of the parameter's
  // shape; gradients are added to it, and an undefined or empty tensor means
  // that parameter's gradient is not wanted.
  virtual void backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                        Tensor& dx, std::vector<Tensor>& grads, Context& ctx);
  virtual bool can_train() const { return false; }

  std::vector<Param>& parameters() { return params_; }
  const std::vector<Param>& parameters() const { return params_; }
  Param& param(const std::string& name);
  const Param& param(const std::string& name) const;

  // Every parameter whole, or with WSLA on only what WSLA trains.
  virtual std::vector<TrainableSlice> trainable_parameters();
  void set_wsla(bool on) { wsla_ = on; }
  bool wsla() const { return wsla_; }
  // The dtype of the recurrent SSM state that make_state gives (F32, or BF16:
  // stored rounded, computed with in F32; ops/state_dtype.h). Only the big
  // (B, H, P, N) states of Mamba-2 and Mamba-3 take it; every other state
  // tensor stays F32, and layers without such a state ignore it.
  void set_state_dtype(DType dtype) { state_dtype_ = dtype; }
  DType state_dtype() const { return state_dtype_; }

 protected:
  // The block's RMSNorm, which forward_add_normed's overrides apply to h
  // inside their in projection (ops::norm_linear).
  struct InputNorm {
    Tensor weight;
    float eps;
  };
  Param& add_param(std::string name, Shape shape, ParamRole role = ParamRole::kWeight);
  // The parameter's value, or an undefined tensor for an absent one (null).
  static const Tensor& value(const Param* p);
  // The gradient buffer of p among grads (see backward), undefined when not
  // wanted or p is null.
  Tensor grad(std::vector<Tensor>& grads, const Param* p) const;
  std::vector<Param> params_;
  bool wsla_ = false;
  DType state_dtype_ = DType::kF32;
};

// Where a forward's intermediates come from: the context's arena while
// inferring (reused by the next call); when they are kept for the backward,
// the context's kept arena while a caller holds a Scope on it (training:
// reused by the next step), else owned tensors.
class Workspace {
 public:
  Workspace(Context& ctx, bool keep) : ctx_(ctx), keep_(keep) {}
  Tensor operator()(const Shape& shape, DType dtype = DType::kF32) const;
  Tensor zeros(const Shape& shape, DType dtype = DType::kF32) const;
  // A copy of t from the same place.
  Tensor copy(const Tensor& t) const;

 private:
  Context& ctx_;
  bool keep_;
};

}  // namespace ssm
