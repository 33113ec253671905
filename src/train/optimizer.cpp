#include "ssm/train/optimizer.h"

#include <cmath>
#include <numbers>

namespace ssm {
namespace {

// Elements per row of a parameter (1 for vectors).
int64_t row_size(const Param& p) {
  int64_t n = 1;
  for (size_t i = 1; i < p.shape.size(); ++i) n *= p.shape[i];
  return n;
}

// [offset, offset + count) of the slice inside the flattened parameter.
std::pair<int64_t, int64_t> slice_range(const TrainableSlice& s) {
  const int64_t rs = row_size(*s.param);
  return {s.row_begin * rs, (s.row_end - s.row_begin) * rs};
}

}  // namespace

Shape slice_shape(const TrainableSlice& s) {
  Shape shape = s.param->shape;
  if (shape.empty()) return {1};
  shape[0] = s.row_end - s.row_begin;
  return shape;
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

double global_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads) {
  double ss = 0;
  for (const TrainableSlice& s : slices) {
    const float* g = grads.of(*s.param).data<float>();
    const auto [off, n] = slice_range(s);
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(g[off + i]) * g[off + i];
  }
  return std::sqrt(ss);
}

double clip_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads, double max_norm) {
  const double norm = global_grad_norm(slices, grads);
  if (max_norm <= 0 || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (const TrainableSlice& s : slices) {
    float* g = grads.of(*s.param).data<float>();
    const auto [off, n] = slice_range(s);
    for (int64_t i = 0; i < n; ++i) g[off + i] *= scale;
  }
  return norm;
}

AdamW::AdamW(std::vector<TrainableSlice> slices, AdamWOptions options)
    : slices_(std::move(slices)), opt_(options) {
  for (const TrainableSlice& s : slices_) {
    m_.push_back(Tensor::zeros(DType::kF32, slice_shape(s)));
    v_.push_back(Tensor::zeros(DType::kF32, slice_shape(s)));
  }
}

void AdamW::step(Gradients& grads, double lr) {
  ++step_;
  const double b1 = opt_.beta1, b2 = opt_.beta2;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step_));
  for (size_t k = 0; k < slices_.size(); ++k) {
    const TrainableSlice& s = slices_[k];
    const auto [off, n] = slice_range(s);
    float* p = s.param->value.data<float>() + off;
    const float* g = grads.of(*s.param).data<float>() + off;
    float* m = m_[k].data<float>();
    float* v = v_[k].data<float>();
    // Decoupled decay (PyTorch AdamW): p *= 1 - lr * wd, before the Adam step.
    const double decay = s.param->role == ParamRole::kWeight ? 1.0 - lr * opt_.weight_decay : 1.0;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * g[i]);
      v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * static_cast<double>(g[i]) * g[i]);
      const double update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + opt_.eps);
      p[i] = static_cast<float>(p[i] * decay - lr * update);
    }
  }
}

}  // namespace ssm
