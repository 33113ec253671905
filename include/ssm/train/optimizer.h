// AdamW with decoupled weight decay (skipped for ParamRole::kNoDecay),
// global-norm gradient clipping and a warmup + cosine learning-rate schedule.
// The optimizer updates only the trainable slices (WSLA rows); every other
// byte of every parameter is left untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ssm/layers/param.h"
#include "ssm/ops/adamw.h"
#include "ssm/train/model_grad.h"

namespace ssm {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
};

struct LrSchedule {
  double peak = 1e-3;
  int64_t warmup = 100;
  int64_t total = 1000;
  double min_ratio = 0.1;  // the cosine ends at peak * min_ratio
  // Linear warmup over steps [0, warmup), then cosine to the floor at total.
  double at(int64_t step) const;
};

// sqrt of the sum of squares of the gradients of the trainable slices.
double global_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads, Context& ctx);
// Scales those gradients by max_norm / norm when norm > max_norm (max_norm
// <= 0: never). Returns the norm before clipping.
double clip_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads, double max_norm,
                      Context& ctx);
// The device's way, where nothing waits: the squared global norm written
// into sum_squares (F64 (1) on ctx's device) for AdamW::step to clip with.
// Only where the slices are every gradient whole and the backend updates
// them in one launch (ops::adamw_slices); elsewhere it returns false,
// having done nothing, and the caller clips with clip_grad_norm.
bool grad_sum_squares_on_device(const std::vector<TrainableSlice>& slices, Gradients& grads,
                                const Tensor& sum_squares, Context& ctx);

class AdamW {
 public:
  AdamW(std::vector<TrainableSlice> slices, AdamWOptions options);

  // One update with learning rate lr from grads; counts steps. On a backend
  // with ops::adamw_slices every slice is updated in one launch, clipped
  // first by clip_sum_squares and max_norm when given (see
  // grad_sum_squares_on_device; elsewhere they must not be given).
  void step(Gradients& grads, double lr, Context& ctx, const Tensor& clip_sum_squares = Tensor(),
            double max_norm = 0);

  int64_t steps() const { return step_; }
  void set_steps(int64_t s) { step_ = s; }
  const std::vector<TrainableSlice>& slices() const { return slices_; }
  // First and second moments, one (rows of the slice, ...) tensor per slice.
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }

 private:
  std::vector<TrainableSlice> slices_;
  AdamWOptions opt_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
  // The fused update's table (ops::AdamWSlice): built on the host at every
  // step (the tensors might have moved), sent to the device when it changed.
  std::vector<ops::AdamWSlice> table_;
  Tensor device_table_;
  bool fused(Gradients& grads, Context& ctx) const;
  void step_fused(Gradients& grads, double lr, Context& ctx, const Tensor& clip_sum_squares,
                  double max_norm);
};

// The shape of a slice: its rows of the parameter's shape.
Shape slice_shape(const TrainableSlice& s);

}  // namespace ssm
