#include "ssm/train/model_grad.h"

#include <cstring>
#include <map>

#include "ssm/ops/rms_norm.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/cross_entropy.h"
#include "ssm/train/ops/rms_norm_backward.h"

namespace ssm {
namespace {

// The model's parts by role, looked up through the one parameter table.
struct Parts {
  Param* embedding = nullptr;
  Param* head = nullptr;
  Param* norm_f = nullptr;
  std::vector<Param*> norm, norm2;
  std::vector<SequenceLayer*> mixer, mlp;
};

Parts parts_of(LanguageModel& model) {
  const ModelConfig& c = model.config();
  std::map<std::string, Param*> by_name;
  model.for_each_param([&](const std::string& name, Param& p) { by_name[name] = &p; });
  auto get = [&](const std::string& name) {
    const auto it = by_name.find(name);
    SSM_CHECK(it != by_name.end(), "model has no parameter ", name);
    return it->second;
  };
  Parts parts;
  parts.embedding = get(c.embedding_name());
  parts.head = c.tie_embeddings ? parts.embedding : get("lm_head.weight");
  parts.norm_f = get("backbone.norm_f.weight");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    parts.norm.push_back(get(c.layer_prefix(i) + "norm.weight"));
    parts.mixer.push_back(&model.mixer(i));
    parts.mlp.push_back(model.mlp(i));
    parts.norm2.push_back(parts.mlp.back() ? get(c.layer_prefix(i) + "norm2.weight") : nullptr);
  }
  return parts;
}

float* data_or_null(Tensor& t) { return t.numel() ? t.data<float>() : nullptr; }

// The gradients of one layer's parameters, sharing the model-wide buffers.
std::vector<Tensor> layer_grads(SequenceLayer& layer, Gradients& g) {
  std::vector<Tensor> out;
  for (const Param& p : layer.parameters()) out.push_back(g.of(p));
  return out;
}

// h = Embedding[ids]; ids already checked by next_token_targets.
Tensor embed(const Parts& parts, const Tensor& ids) {
  const int64_t rows = ids.numel(), D = parts.embedding->shape[1];
  Tensor h = Tensor::empty(DType::kF32, {ids.dim(0), ids.dim(1), D});
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : ids.data<int32_t>()[r];
    std::memcpy(h.data<float>() + r * D, parts.embedding->value.data<float>() + t * D, D * sizeof(float));
  }
  return h;
}

void add_into(Tensor& h, const Tensor& out) {
  float* hp = h.data<float>();
  const float* op = out.data<float>();
  for (int64_t k = 0; k < h.numel(); ++k) hp[k] += op[k];
}

// Runs the blocks over h in place; saved (when given) receives h entering
// each sub-block: [mixer_0, (mlp_0), mixer_1, ...].
void run_blocks(const Parts& parts, float eps, Tensor& h, std::vector<Tensor>* saved, Context& ctx) {
  const int64_t rows = h.dim(0) * h.dim(1), D = h.dim(2);
  Tensor normed = Tensor::empty(DType::kF32, h.shape());
  Tensor out = Tensor::empty(DType::kF32, h.shape());
  for (size_t i = 0; i < parts.mixer.size(); ++i) {
    if (saved) saved->push_back(h.clone());
    ops::rms_norm(h.data<float>(), parts.norm[i]->value.data<float>(), rows, D, eps,
                  normed.data<float>(), ctx.pool());
    parts.mixer[i]->forward(normed, out, nullptr, ctx);
    add_into(h, out);
    if (!parts.mlp[i]) continue;
    if (saved) saved->push_back(h.clone());
    ops::rms_norm(h.data<float>(), parts.norm2[i]->value.data<float>(), rows, D, eps,
                  normed.data<float>(), ctx.pool());
    parts.mlp[i]->forward(normed, out, nullptr, ctx);
    add_into(h, out);
  }
}

// dh += backward of h + layer(RMSNorm(h; w)) at saved input x.
void block_backward(SequenceLayer& layer, Param& norm_w, const Tensor& x, Tensor& dh, Gradients& g,
                    float eps, Context& ctx) {
  const int64_t rows = x.dim(0) * x.dim(1), D = x.dim(2);
  Tensor normed = Tensor::empty(DType::kF32, x.shape());
  Tensor dnormed = Tensor::empty(DType::kF32, x.shape());
  ops::rms_norm(x.data<float>(), norm_w.value.data<float>(), rows, D, eps, normed.data<float>(),
                ctx.pool());
  std::vector<Tensor> grads = layer_grads(layer, g);
  layer_backward(layer, normed, dh, dnormed, grads, ctx);
  ops::rms_norm_backward(x.data<float>(), norm_w.value.data<float>(), dnormed.data<float>(), rows,
                         D, eps, dh.data<float>(), true, data_or_null(g.of(norm_w)), ctx.pool());
}

}  // namespace

Gradients::Gradients(LanguageModel& model, bool all) {
  std::map<const Param*, bool> trains;
  for (const TrainableSlice& s : model.trainable_parameters()) trains[s.param] = true;
  model.for_each_param([&](const std::string& name, Param& p) {
    names_.push_back(name);
    params_.push_back(&p);
    grads_.push_back(all || trains.count(&p) ? Tensor::zeros(DType::kF32, p.shape) : Tensor());
  });
}

void Gradients::zero() {
  for (Tensor& t : grads_)
    if (t.numel()) std::memset(t.raw(), 0, t.nbytes());
}

Tensor& Gradients::of(const Param& p) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i] == &p) return grads_[i];
  throw Error(cat("parameter '", p.name, "' is not one of the model's"));
}

std::vector<int64_t> next_token_targets(const Tensor& ids, int64_t vocab_size) {
  if (ids.ndim() != 2) throw Error(cat("input_ids must be (batch, length), got ", shape_str(ids.shape())));
  if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32)
    throw Error(cat("input_ids must be I64 or I32, got ", dtype_name(ids.dtype())));
  const int64_t B = ids.dim(0), L = ids.dim(1);
  if (L == 0) throw Error("input_ids has length 0");
  std::vector<int64_t> targets(B * L, -1);
  for (int64_t r = 0; r < B * L; ++r) {
    const int64_t t = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : ids.data<int32_t>()[r];
    if (t < 0 || t >= vocab_size)
      throw Error(cat("token id ", t, " at position ", r, " is outside the vocabulary [0, ",
                      vocab_size, ")"));
    if (r % L != 0) targets[r - 1] = t;
  }
  return targets;
}

LossSum model_loss_and_grad(LanguageModel& model, const Tensor& ids, Gradients* grads, double scale,
                            Context& ctx, std::vector<double>* position_loss) {
  const ModelConfig& c = model.config();
  const Parts parts = parts_of(model);
  const std::vector<int64_t> targets = next_token_targets(ids, c.vocab_size);
  const int64_t B = ids.dim(0), L = ids.dim(1), rows = B * L, D = c.d_model;
  const float eps = c.norm_eps;

  Tensor h = embed(parts, ids);
  std::vector<Tensor> saved;
  run_blocks(parts, eps, h, grads ? &saved : nullptr, ctx);

  Tensor f = Tensor::empty(DType::kF32, {rows, D});
  ops::rms_norm(h.data<float>(), parts.norm_f->value.data<float>(), rows, D, eps, f.data<float>(),
                ctx.pool());
  LossSum loss;
  loss.count = B * (L - 1);
  if (position_loss) position_loss->assign(rows, 0.0);
  Tensor df = grads ? Tensor::empty(DType::kF32, {rows, D}) : Tensor();
  loss.sum = ops::head_cross_entropy(
      {.rows = rows, .D = D, .V = c.vocab_size, .f = f.data<float>(),
       .head = parts.head->value.data<float>(), .targets = targets.data(),
       .grad_scale = grads && loss.count ? scale / static_cast<double>(loss.count) : 0.0,
       .df = grads ? df.data<float>() : nullptr,
       .dhead = grads ? data_or_null(grads->of(*parts.head)) : nullptr,
       .row_loss = position_loss ? position_loss->data() : nullptr},
      ctx.pool());
  if (!grads || loss.count == 0) return loss;

  // dh from the final norm, then back through the blocks.
  Tensor dh = Tensor::empty(DType::kF32, {B, L, D});
  ops::rms_norm_backward(h.data<float>(), parts.norm_f->value.data<float>(), df.data<float>(), rows,
                         D, eps, dh.data<float>(), false, data_or_null(grads->of(*parts.norm_f)),
                         ctx.pool());
  for (int64_t i = c.n_layer - 1; i >= 0; --i) {
    if (parts.mlp[i]) {
      block_backward(*parts.mlp[i], *parts.norm2[i], saved.back(), dh, *grads, eps, ctx);
      saved.pop_back();
    }
    block_backward(*parts.mixer[i], *parts.norm[i], saved.back(), dh, *grads, eps, ctx);
    saved.pop_back();
  }
  if (float* dE = data_or_null(grads->of(*parts.embedding)))
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : ids.data<int32_t>()[r];
      for (int64_t d = 0; d < D; ++d) dE[t * D + d] += dh.data<float>()[r * D + d];
    }
  return loss;
}

LossSum model_loss(LanguageModel& model, const Tensor& ids, Context& ctx,
                   std::vector<double>* position_loss) {
  return model_loss_and_grad(model, ids, nullptr, 0.0, ctx, position_loss);
}

}  // namespace ssm
