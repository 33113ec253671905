// Loss and gradients of a whole language model (SPEC §1, §6). The training
// forward keeps the residual stream entering each block (and between mixer
// and MLP), and with keep_activations each layer's internals; otherwise
// each layer's backward recomputes its internals from its input.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ssm/model/language_model.h"

namespace ssm {

// One F32 gradient per parameter, in for_each_param order. Parameters that
// do not train (WSLA) get an empty tensor and no gradient is computed.
class Gradients {
 public:
  // all: a gradient for every parameter; otherwise only for the parameters
  // that model.trainable_parameters() names (whole tensors).
  explicit Gradients(LanguageModel& model, bool all = false);

  void zero(Context& ctx);
  size_t size() const { return params_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }
  Param& param(size_t i) { return *params_[i]; }
  Tensor& grad(size_t i) { return grads_[i]; }
  // The gradient of a parameter (empty when it does not train).
  Tensor& of(const Param& p);
  bool wanted(const Param& p) { return of(p).numel() > 0; }
  // One buffer that every gradient is a view of (64-byte aligned pieces,
  // zeros between them), so that a device sums or scales them all at once.
  const Tensor& flat() const { return flat_; }
  // The elements of every gradient together (flat() without its padding).
  int64_t elements() const { return elements_; }

 private:
  std::vector<std::string> names_;
  std::vector<Param*> params_;
  std::vector<Tensor> grads_;
  Tensor flat_;
  int64_t elements_ = 0;
};

// Next-token targets of ids (B, L): targets[b*L + t] = ids[b, t+1], -1 at t = L-1.
std::vector<int64_t> next_token_targets(const Tensor& ids, int64_t vocab_size);

struct LossSum {
  double sum = 0;     // sum of -log p(target) over predicted positions
  int64_t count = 0;  // predicted positions: B * (L - 1)
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

// Told, during a backward, the parameters whose gradients no later part of
// the backward touches (in backward order: head, final norm, the blocks
// last first, embedding), so that a data-parallel reduction of them can
// start while the backward goes on.
using GradientsFinal = std::function<void(const std::vector<const Param*>&)>;

// Loss of the batch; with grads, adds scale * d(mean loss)/d(param) to them
// (scale = 1 / micro-batches under gradient accumulation). keep_activations:
// each layer keeps its internals from the forward for its backward (memory
// for speed; the same results) instead of recomputing them. on_final: see
// GradientsFinal (a parameter is named at most once). dropout: training's
// residual dropout (ResidualDropout; p = 0, the default, is none), refused
// for Falcon-H1's parallel and Zamba2's shared blocks. loss_out (an F64 (1)
// tensor on the context's device, not with position_loss): the loss sum is
// written there and the returned sum is 0, so that a device backend's host
// queues the whole step without waiting for its work (Trainer::step).
LossSum model_loss_and_grad(LanguageModel& model, const Tensor& ids, Gradients* grads, double scale,
                            Context& ctx, std::vector<double>* position_loss = nullptr,
                            bool keep_activations = false, const GradientsFinal* on_final = nullptr,
                            const ResidualDropout& dropout = {}, const Tensor& loss_out = Tensor());

// Forward only (no residuals kept unless it drops), the same loss;
// position_loss (B*L) is filled with each position's loss when given.
LossSum model_loss(LanguageModel& model, const Tensor& ids, Context& ctx,
                   std::vector<double>* position_loss = nullptr, const ResidualDropout& dropout = {});

}  // namespace ssm
