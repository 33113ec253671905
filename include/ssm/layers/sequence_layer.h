// The interface every mixer and sub-block shares: forward over a batch of
// sequences carrying a recurrent state, one-token steps, its parameters, the
// subset that trains and the WSLA fast-adapt switch.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssm/core/context.h"
#include "ssm/layers/param.h"

namespace ssm {

// A layer's recurrent state for a batch of sequences (conv rows, SSM state,
// KV cache, ...), exposed as named tensors for copying and saving.
class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual std::vector<std::pair<std::string, Tensor*>> tensors() = 0;
  void zero();
};

class SequenceLayer {
 public:
  virtual ~SequenceLayer() = default;

  virtual std::string kind() const = 0;
  // A fresh (all-zero) state for `batch` sequences; null for stateless layers.
  virtual std::unique_ptr<LayerState> make_state(int64_t batch) const = 0;

  // x (B, L, D) -> y (B, L, D), y preallocated. With a state, it is read as
  // the state before x[:, 0] and replaced by the state after x[:, L-1]; with
  // null, the sequences start fresh and the final state is dropped.
  virtual void forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) = 0;

  // One token per sequence: x (B, D) -> y (B, D), state advanced in place.
  virtual void step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx);

  std::vector<Param>& parameters() { return params_; }
  const std::vector<Param>& parameters() const { return params_; }
  Param& param(const std::string& name);
  const Param& param(const std::string& name) const;

  // Every parameter whole, or with WSLA on only what WSLA trains.
  virtual std::vector<TrainableSlice> trainable_parameters();
  void set_wsla(bool on) { wsla_ = on; }
  bool wsla() const { return wsla_; }

 protected:
  Param& add_param(std::string name, Shape shape, ParamRole role = ParamRole::kWeight);
  std::vector<Param> params_;
  bool wsla_ = false;
};

}  // namespace ssm
