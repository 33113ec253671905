#include "ssm/train/optimizer.h"

#include <cmath>
#include <numbers>

#include "ssm/core/error.h"
#include "ssm/ops/adamw.h"
#include "ssm/ops/elementwise.h"

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

// The trainable part of a parameter's tensor (or of its gradient): the
// slice's rows, flattened.
Tensor slice_of(const TrainableSlice& s, const Tensor& t) {
  const auto [off, n] = slice_range(s);
  return t.reshape({t.numel()}).slice(0, off, off + n);
}

// On a device, when the slices are every gradient whole, the norm and the
// clipping each take one op over the gradients' shared buffer: one read
// back to the host per step instead of one per parameter. (The host keeps
// the per-slice order its results were always computed in.)
bool whole_on_device(const std::vector<TrainableSlice>& slices, Gradients& grads, Context& ctx) {
  if (ctx.device() == Device::host() || grads.flat().device() != ctx.device()) return false;
  int64_t n = 0;
  for (const TrainableSlice& s : slices) {
    if (s.row_begin != 0 || s.param->shape.empty() || s.row_end != s.param->shape[0]) return false;
    n += shape_numel(s.param->shape);
  }
  return n == grads.elements();
}

double global_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads, Context& ctx) {
  if (whole_on_device(slices, grads, ctx)) return std::sqrt(ops::sum_squares(ctx, grads.flat()));
  double ss = 0;
  for (const TrainableSlice& s : slices) ss += ops::sum_squares(ctx, slice_of(s, grads.of(*s.param)));
  return std::sqrt(ss);
}

double clip_grad_norm(const std::vector<TrainableSlice>& slices, Gradients& grads, double max_norm,
                      Context& ctx) {
  const double norm = global_grad_norm(slices, grads, ctx);
  if (max_norm <= 0 || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  if (whole_on_device(slices, grads, ctx)) {
    ops::scale(ctx, grads.flat(), scale);
    return norm;
  }
  for (const TrainableSlice& s : slices) ops::scale(ctx, slice_of(s, grads.of(*s.param)), scale);
  return norm;
}

bool grad_sum_squares_on_device(const std::vector<TrainableSlice>& slices, Gradients& grads,
                                const Tensor& sum_squares, Context& ctx) {
  if (!whole_on_device(slices, grads, ctx) || !ops::has_adamw_slices(ctx)) return false;
  ops::sum_squares_to(ctx, grads.flat(), sum_squares);
  return true;
}

AdamW::AdamW(std::vector<TrainableSlice> slices, AdamWOptions options)
    : slices_(std::move(slices)), opt_(options) {
  for (const TrainableSlice& s : slices_) {
    // The moments live where the parameter does.
    m_.push_back(Tensor::zeros(DType::kF32, slice_shape(s), s.param->value.device()));
    v_.push_back(Tensor::zeros(DType::kF32, slice_shape(s), s.param->value.device()));
  }
}

bool AdamW::fused(Gradients& grads, Context& ctx) const {
  if (ctx.device().is_host() || !ops::has_adamw_slices(ctx)) return false;
  for (const TrainableSlice& s : slices_)
    if (s.param->value.device() != ctx.device() || grads.of(*s.param).device() != ctx.device())
      return false;
  return true;
}

void AdamW::step_fused(Gradients& grads, double lr, Context& ctx, const Tensor& clip_sum_squares,
                       double max_norm) {
  if (slices_.empty()) return;
  BackendResources* r = ctx.resources();
  std::vector<ops::AdamWSlice> table;
  int64_t begin = 0;
  for (size_t k = 0; k < slices_.size(); ++k) {
    const TrainableSlice& s = slices_[k];
    Tensor p = slice_of(s, s.param->value), m = m_[k], v = v_[k];
    const Tensor g = slice_of(s, grads.of(*s.param));
    table.push_back({.param = static_cast<float*>(p.raw()), .grad = g.data<float>(),
                     .m = static_cast<float*>(m.raw()), .v = static_cast<float*>(v.raw()),
                     .begin = begin, .n = p.numel(),
                     .decays = s.param->role == ParamRole::kWeight ? 1 : 0,
                     // Asked at every step: the backend may drop its copies
                     // (another trainer's end), and the table changes then.
                     .bf16 = r ? r->bf16_copy_for_update(p.data<float>(), p.numel()) : nullptr});
    begin += (p.numel() + 3) / 4 * 4;  // whole quads (ops::AdamWSlice::begin)
  }
  if (table != table_ || !device_table_.defined()) {
    table_ = std::move(table);
    const int64_t words = static_cast<int64_t>(table_.size()) * ops::kAdamWSliceWords;
    device_table_ = Tensor::borrow(nullptr, table_.data(), DType::kI64, {words}).to(ctx.device());
  }
  // Decoupled decay (PyTorch AdamW) only for weights, not norms and biases:
  // the table's `decays`.
  ops::adamw_slices(ctx, {.table = device_table_,
                          .slices = static_cast<int64_t>(table_.size()),
                          .elements = table_.back().begin + table_.back().n,
                          .lr = lr,
                          .beta1 = opt_.beta1,
                          .beta2 = opt_.beta2,
                          .eps = opt_.eps,
                          .weight_decay = opt_.weight_decay,
                          .step = step_,
                          .clip_sum_squares = clip_sum_squares,
                          .max_norm = max_norm});
}

void AdamW::step(Gradients& grads, double lr, Context& ctx, const Tensor& clip_sum_squares,
                 double max_norm) {
  ++step_;
  if (fused(grads, ctx)) {
    step_fused(grads, lr, ctx, clip_sum_squares, max_norm);
    return;
  }
  SSM_CHECK(!clip_sum_squares.defined(), "a clip on the device needs the fused update");
  for (size_t k = 0; k < slices_.size(); ++k) {
    const TrainableSlice& s = slices_[k];
    // Decoupled decay (PyTorch AdamW) only for weights, not norms and biases.
    const double wd = s.param->role == ParamRole::kWeight ? opt_.weight_decay : 0.0;
    ops::adamw(ctx, {.param = slice_of(s, s.param->value), .grad = slice_of(s, grads.of(*s.param)),
                     .m = m_[k], .v = v_[k], .lr = lr, .beta1 = opt_.beta1, .beta2 = opt_.beta2,
                     .eps = opt_.eps, .weight_decay = wd, .step = step_});
  }
}

}  // namespace ssm
