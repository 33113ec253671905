#include "ssm/train/model_grad.h"

#include <cstring>
#include <map>
#include <optional>

#include "ssm/ops/cross_entropy.h"
#include "ssm/ops/dropout.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/embedding.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {
namespace {

// The gradients of one layer's parameters, sharing the model-wide buffers.
std::vector<Tensor> layer_grads(SequenceLayer& layer, Gradients& g) {
  std::vector<Tensor> out;
  for (const Param& p : layer.parameters()) out.push_back(g.of(p));
  return out;
}

Tensor grad_or_none(Gradients& g, const Param& p) {
  Tensor& t = g.of(p);
  return t.numel() ? t : Tensor();
}

// Where the step holds a scope on the kept arena (the host), one more: what
// a recomputing forward keeps is released when the layer's backward ends.
class NestedKeptScope {
 public:
  explicit NestedKeptScope(Context& ctx) {
    if (ctx.kept_arena().in_scope()) scope_.emplace(ctx.kept_arena());
  }

 private:
  std::optional<Arena::Scope> scope_;
};

// alpha dh, in the arena (dh itself when alpha is 1): the gradient of a
// layer's output that joined the residual stream times alpha.
Tensor scaled(const Tensor& dh, float alpha, Context& ctx) {
  if (alpha == 1.f) return dh;
  const Tensor t = ctx.arena().alloc(DType::kF32, dh.shape());
  ops::copy(ctx, t, dh);
  ops::scale(ctx, t, alpha);
  return t;
}

// The gradient of a layer's output from dh: alpha dh, and where the forward
// dropped elements of that output (model_forward.cpp), the same mask over it.
Tensor layer_output_grad(const Tensor& dh, float alpha, const ResidualDropout& drop, uint64_t site,
                         Context& ctx) {
  if (!drop.on()) return scaled(dh, alpha, ctx);
  const Tensor t = ctx.arena().alloc(DType::kF32, dh.shape());
  ops::copy(ctx, t, dh);
  if (alpha != 1.f) ops::scale(ctx, t, alpha);
  ops::dropout_backward(ctx, {.t = t, .p = drop.p, .seed = drop.seed, .step = drop.step, .site = site});
  return t;
}

// dh += the backward of h + m layer(RMSNorm(h; w)) at the sub-block's input
// x (m the residual multiplier), from the activations the forward kept, or
// recomputing them.
void sub_block_backward(SequenceLayer& layer, const Param& norm_w, const Tensor& x,
                        std::unique_ptr<LayerActivations> kept, const Tensor& dh, Gradients& g,
                        float eps, float m, const ResidualDropout& drop, uint64_t site, Context& ctx) {
  Arena::Scope scope(ctx.arena());
  const NestedKeptScope kept_scope(ctx);
  const Tensor normed = ctx.arena().alloc(DType::kF32, x.shape());
  Tensor dnormed = ctx.arena().alloc(DType::kF32, x.shape());
  ops::rms_norm(ctx, {.x = x, .w = norm_w.value, .eps = eps, .out = normed});
  if (!kept) {
    Tensor out = ctx.arena().alloc(DType::kF32, x.shape());
    layer.forward(normed, out, nullptr, ctx, &kept);
  }
  std::vector<Tensor> grads = layer_grads(layer, g);
  layer.backward(*kept, normed, layer_output_grad(dh, m, drop, site, ctx), dnormed, grads, ctx);
  ops::rms_norm_backward(ctx, {.x = x, .w = norm_w.value, .eps = eps, .dout = dnormed, .dx = dh,
                               .accumulate_dx = true, .dw = grad_or_none(g, norm_w)});
}

// The backward's parts in order, each with the parameters it adds
// gradients to, and for each part the parameters it is the last to touch.
std::vector<std::vector<const Param*>> finals_by_part(LanguageModel& model) {
  const ModelConfig& c = model.config();
  std::vector<std::vector<const Param*>> parts;
  auto layer_part = [&](SequenceLayer& layer, const Param& norm) {
    std::vector<const Param*> ps;
    for (const Param& p : layer.parameters()) ps.push_back(&p);
    ps.push_back(&norm);
    parts.push_back(ps);
  };
  parts.push_back({&model.head()});
  parts.push_back({&model.norm_f()});
  for (int64_t i = c.n_layer - 1; i >= 0; --i) {
    LanguageModel::Block& b = model.block(i);
    if (b.mlp) layer_part(*b.mlp, b.norm2);
    layer_part(*b.mixer, b.norm);
    // Falcon-H1's parallel attention and Zamba2's shared block use are in
    // the mixer's part; a shared block's own weights are final after the
    // first layer that uses it (the last one the backward reaches).
    if (b.parallel)
      for (const Param& p : b.parallel->parameters()) parts.back().push_back(&p);
    if (b.shared) {
      for (const Param& p : b.shared->parameters()) parts.back().push_back(&p);
      for (const Param& p : static_cast<SharedBlockUse&>(*b.shared).block().parameters())
        parts.back().push_back(&p);
    }
  }
  parts.push_back({&model.embedding()});
  std::map<const Param*, size_t> last;
  for (size_t k = 0; k < parts.size(); ++k)
    for (const Param* p : parts[k]) last[p] = k;
  std::vector<std::vector<const Param*>> finals(parts.size());
  for (const auto& [p, k] : last) finals[k].push_back(p);
  return finals;
}

// Falcon-H1's parallel layer, recomputed from its input x:
//   h += m_ssm mamba(n) + m_out attention(m_in n),  n = RMSNorm(x; w)
void parallel_block_backward(const ModelConfig& c, LanguageModel::Block& b, const Tensor& x,
                             const Tensor& dh, Gradients& g, Context& ctx) {
  Arena::Scope scope(ctx.arena());
  const NestedKeptScope kept_scope(ctx);
  auto alloc = [&] { return ctx.arena().alloc(DType::kF32, x.shape()); };
  const Tensor n = alloc(), n_in = alloc();
  Tensor out = alloc(), dn = alloc(), dn_in = alloc();
  ops::rms_norm(ctx, {.x = x, .w = b.norm.value, .eps = c.norm_eps, .out = n});
  ops::copy(ctx, n_in, n);
  ops::scale(ctx, n_in, c.attention_in_multiplier);
  std::unique_ptr<LayerActivations> mixer_kept, attention_kept;
  b.mixer->forward(n, out, nullptr, ctx, &mixer_kept);
  b.parallel->forward(n_in, out, nullptr, ctx, &attention_kept);
  std::vector<Tensor> mixer_grads = layer_grads(*b.mixer, g), attention_grads = layer_grads(*b.parallel, g);
  b.mixer->backward(*mixer_kept, n, scaled(dh, c.ssm_out_multiplier, ctx), dn, mixer_grads, ctx);
  b.parallel->backward(*attention_kept, n_in, scaled(dh, c.attention_out_multiplier, ctx), dn_in,
                       attention_grads, ctx);
  ops::add(ctx, dn, dn_in, c.attention_in_multiplier);
  ops::rms_norm_backward(ctx, {.x = x, .w = b.norm.value, .eps = c.norm_eps, .dout = dn, .dx = dh,
                               .accumulate_dx = true, .dw = grad_or_none(g, b.norm)});
}

// Zamba2's block with a use of a shared block, recomputed from its input x
// and the embeddings e:
//   s = shared([x | e]),  t = x + s,  h = x + m mamba(RMSNorm(t; w))
// The gradient of e is added to demb; the shared weights' gradients, which
// every use of the block adds to, follow the use's own in its grads.
void shared_block_backward(const ModelConfig& c, LanguageModel::Block& b, const Tensor& x,
                           const Tensor& e, const Tensor& dh, const Tensor& demb, Gradients& g,
                           Context& ctx) {
  Arena::Scope scope(ctx.arena());
  const NestedKeptScope kept_scope(ctx);
  const int64_t D = c.d_model;
  auto alloc = [&](int64_t width) {
    Shape s = x.shape();
    s.back() = width;
    return ctx.arena().alloc(DType::kF32, s);
  };
  const Tensor joined = alloc(2 * D), t = alloc(D), normed = alloc(D), dt = alloc(D);
  Tensor out = alloc(D), s = alloc(D), djoined = alloc(2 * D), dnormed = alloc(D);
  ops::copy(ctx, joined.cols(0, D), x);
  ops::copy(ctx, joined.cols(D, 2 * D), e);
  std::unique_ptr<LayerActivations> shared_kept, mixer_kept;
  b.shared->forward(joined, s, nullptr, ctx, &shared_kept);
  ops::copy(ctx, t, s);
  ops::add(ctx, t, x);
  ops::rms_norm(ctx, {.x = t, .w = b.norm.value, .eps = c.norm_eps, .out = normed});
  b.mixer->forward(normed, out, nullptr, ctx, &mixer_kept);

  std::vector<Tensor> mixer_grads = layer_grads(*b.mixer, g);
  b.mixer->backward(*mixer_kept, normed, scaled(dh, c.residual_multiplier, ctx), dnormed, mixer_grads, ctx);
  ops::rms_norm_backward(ctx, {.x = t, .w = b.norm.value, .eps = c.norm_eps, .dout = dnormed, .dx = dt,
                               .dw = grad_or_none(g, b.norm)});
  std::vector<Tensor> shared_grads = layer_grads(*b.shared, g);
  for (Param& p : static_cast<SharedBlockUse&>(*b.shared).block().parameters())
    shared_grads.push_back(g.of(p));
  b.shared->backward(*shared_kept, joined, dt, djoined, shared_grads, ctx);
  ops::add(ctx, dh, dt);
  ops::add(ctx, dh, djoined.cols(0, D));
  ops::add(ctx, demb, djoined.cols(D, 2 * D));
}

// A host tensor of the step on the context's device: through the backend's
// queued copy where it has one, so that the host does not wait for the
// device to finish the work queued before (the last step's update) at
// every step. `refill` makes its bytes from a later step's inputs, for a
// backend that replays a recorded step.
Tensor step_input_on_device(const Tensor& t, const Workspace& step_tensors, Context& ctx,
                            const BackendResources::StepInputFill& refill) {
  if (t.device() == ctx.device()) return t;
  BackendResources* r = ctx.resources();
  if (t.device().is_host() && t.is_dense() && r) {
    Tensor on = step_tensors(t.shape(), t.dtype());
    if (r->copy_step_input_queued(on.raw(), t.raw(), t.nbytes(), refill)) return on;
  }
  return t.to(ctx.device());
}

}  // namespace

Gradients::Gradients(LanguageModel& model, bool all) {
  std::map<const Param*, bool> trains;
  for (const TrainableSlice& s : model.trainable_parameters()) trains[s.param] = true;
  constexpr int64_t kAlign = 16;  // floats: 64 bytes, as every allocation
  std::vector<int64_t> offsets;
  int64_t total = 0;
  Device device = Device::host();
  model.for_each_param([&](const std::string& name, Param& p) {
    names_.push_back(name);
    params_.push_back(&p);
    const bool wanted = all || trains.count(&p);
    offsets.push_back(wanted ? total : -1);
    if (wanted) {
      const int64_t n = shape_numel(p.shape);
      elements_ += n;
      total += (n + kAlign - 1) / kAlign * kAlign;
      device = p.value.device();  // the gradients live where the parameters do
    }
  });
  flat_ = Tensor::zeros(DType::kF32, {total}, device);
  for (size_t i = 0; i < params_.size(); ++i)
    grads_.push_back(offsets[i] < 0 ? Tensor()
                                    : flat_.slice(0, offsets[i], offsets[i] + shape_numel(params_[i]->shape))
                                          .reshape(params_[i]->shape));
}

void Gradients::zero(Context& ctx) {
  if (flat_.numel()) ops::fill(ctx, flat_, 0.f);
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
                            Context& ctx, std::vector<double>* position_loss, bool keep_activations,
                            const GradientsFinal* on_final, const ResidualDropout& dropout,
                            const Tensor& loss_out) {
  const ModelConfig& c = model.config();
  if (dropout.on())
    for (int64_t i = 0; i < c.n_layer; ++i)
      if (model.block(i).parallel || model.block(i).shared)
        throw Error(cat("dropout: layer ", i, " of this ", c.family, " model is a ",
                        model.block(i).parallel ? "parallel attention" : "shared-block",
                        " block, which has no dropout yet (train it with dropout 0)"));
  // Refused before any work: the first layer without a backward, by name.
  for (int64_t i = 0; grads && i < c.n_layer; ++i) {
    if (!model.mixer(i).can_train())
      throw Error(cat("layer ", i, " (", model.mixer(i).kind(), ") has no backward: a ", c.family,
                      " model cannot be trained yet"));
    if (model.mlp(i) && !model.mlp(i)->can_train())
      throw Error(cat("layer ", i, " (its ", model.mlp(i)->kind(), ") has no backward: a ", c.family,
                      " model cannot be trained yet"));
  }
  for (int64_t i = 0; grads && i < c.n_layer; ++i) {
    LanguageModel::Block& b = model.block(i);
    if ((b.parallel && !b.parallel->can_train()) || (b.shared && !b.shared->can_train()))
      throw Error(cat("layer ", i, " (its ", (b.parallel ? b.parallel : b.shared)->kind(),
                      ") has no backward: a ", c.family, " model cannot be trained yet"));
  }
  const std::vector<int64_t> targets = next_token_targets(ids, c.vocab_size);
  const int64_t B = ids.dim(0), L = ids.dim(1), rows = B * L, D = c.d_model;
  const float eps = c.norm_eps;
  const Device device = ctx.device();
  // On the host, the step's activations (the residual stream, the kept
  // internals and the tape's copies, see Workspace) come from the kept arena:
  // after the first step the same pages serve every step, where fresh ones
  // cost the kernel a fault each (about a tenth of a step on the 130m shape).
  // Not on a device, where the arena's growth by doubling would hold up to
  // twice the memory.
  std::optional<Arena::Scope> kept_scope;
  if (device.is_host()) kept_scope.emplace(ctx.kept_arena());
  const Workspace step_tensors(ctx, true);

  const Tensor ids_on = step_input_on_device(
      ids, step_tensors, ctx,
      [bytes = ids.nbytes(), dtype = ids.dtype()](const BackendResources::StepInputs& in, void* out) {
        SSM_CHECK(in.ids.nbytes() == bytes && in.ids.dtype() == dtype && in.ids.is_dense(),
                  "a recorded step's ids are ", shape_str(in.ids.shape()), " ", dtype_name(in.ids.dtype()));
        std::memcpy(out, in.ids.raw(), bytes);
      });
  const Tensor h = step_tensors({B, L, D});
  model.embed(ids_on, h, ctx);
  BlockTape tape;
  tape.keep_activations = keep_activations;
  tape.dropout = dropout;
  // A forward without gradients keeps the tape too when it drops (the
  // finite-difference checks of training with dropout).
  model.run_blocks(h, nullptr, ctx, grads || dropout.on() ? &tape : nullptr);

  const Tensor f = step_tensors({B, L, D});
  ops::rms_norm(ctx, {.x = h, .w = model.norm_f().value, .eps = eps, .out = f});
  // Logits divided by logits_scaling (Granite; Falcon-H1's head multiplier):
  // the head reads f / s, and df is scaled back below.
  const float logit_scale = 1.f / c.logits_scaling;
  if (logit_scale != 1.f) ops::scale(ctx, f, logit_scale);
  LossSum loss;
  loss.count = B * (L - 1);
  Tensor row_loss;
  if (position_loss) row_loss = Tensor::zeros(DType::kF64, {rows});
  const Tensor df = grads ? step_tensors({B, L, D}) : Tensor();
  // On a device, queued there now: the next step's are the next ids' targets.
  const Tensor target_ids = step_input_on_device(
      Tensor::borrow(nullptr, const_cast<int64_t*>(targets.data()), DType::kI64, {rows}), step_tensors,
      ctx, [vocab = c.vocab_size](const BackendResources::StepInputs& in, void* out) {
        const std::vector<int64_t> next = next_token_targets(in.ids, vocab);
        std::memcpy(out, next.data(), next.size() * sizeof(int64_t));
      });
  // A head converted for inference (--dtype) is scored at its stored values,
  // widened once per call: the fused loss kernels read F32.
  const Tensor& stored_head = model.head().value;
  const Tensor head = stored_head.dtype() == DType::kF32 || grads
                          ? stored_head
                          : stored_head.to_f32().to(device);
  loss.sum = ops::head_cross_entropy(
      ctx, {.vocab = c.vocab_size, .f = f, .head = head, .targets = target_ids,
            .grad_scale = grads && loss.count ? scale / static_cast<double>(loss.count) : 0.0,
            .df = df, .dhead = grads ? grad_or_none(*grads, model.head()) : Tensor(),
            .row_loss = row_loss, .sum_out = loss_out});
  if (position_loss) position_loss->assign(row_loss.data<double>(), row_loss.data<double>() + rows);
  std::vector<std::vector<const Param*>> finals;
  size_t part = 0;
  auto part_done = [&] {
    if (part < finals.size() && !finals[part].empty()) (*on_final)(finals[part]);
    ++part;
  };
  if (on_final && grads) {
    finals = finals_by_part(model);
    if (loss.count == 0) {  // no gradient at all: everything is final now
      while (part < finals.size()) part_done();
      return loss;
    }
  }
  if (!grads || loss.count == 0) return loss;
  part_done();  // the head

  // dh from the final norm, then back through the blocks, last first.
  if (logit_scale != 1.f) ops::scale(ctx, df, logit_scale);
  const Tensor dh = step_tensors({B, L, D});
  // Zamba2: the gradient of the embeddings every shared block use read.
  const Tensor demb = tape.embedded.defined() ? step_tensors.zeros({B, L, D}) : Tensor();
  ops::rms_norm_backward(ctx, {.x = h, .w = model.norm_f().value, .eps = eps, .dout = df, .dx = dh,
                               .dw = grad_or_none(*grads, model.norm_f())});
  part_done();
  size_t sub = tape.inputs.size();
  for (int64_t i = c.n_layer - 1; i >= 0; --i) {
    LanguageModel::Block& b = model.block(i);
    if (b.mlp) {
      --sub;
      sub_block_backward(*b.mlp, b.norm2, tape.inputs[sub], std::move(tape.activations[sub]), dh,
                         *grads, eps, c.residual_multiplier, dropout, ResidualDropout::layer_site(i, true),
                         ctx);
      tape.inputs[sub] = Tensor();  // each input is released once read for the last time
      part_done();
    }
    --sub;
    if (b.parallel)
      parallel_block_backward(c, b, tape.inputs[sub], dh, *grads, ctx);
    else if (b.shared)
      shared_block_backward(c, b, tape.inputs[sub], tape.embedded, dh, demb, *grads, ctx);
    else
      sub_block_backward(*b.mixer, b.norm, tape.inputs[sub], std::move(tape.activations[sub]), dh,
                         *grads, eps, c.residual_multiplier, dropout,
                         ResidualDropout::layer_site(i, false), ctx);
    tape.inputs[sub] = Tensor();
    part_done();
  }
  if (demb.defined()) ops::add(ctx, dh, demb);
  if (dropout.on())
    ops::dropout_backward(ctx, {.t = dh, .p = dropout.p, .seed = dropout.seed, .step = dropout.step,
                                .site = ResidualDropout::kEmbeddingSite});
  if (c.embedding_multiplier != 1.f) ops::scale(ctx, dh, c.embedding_multiplier);
  if (Tensor dE = grad_or_none(*grads, model.embedding()); dE.defined())
    ops::embedding_backward(ctx, {.ids = ids_on, .dout = dh, .dtable = dE,
                                  .host_ids = ids.device().is_host() && ids.is_dense() ? ids : Tensor()});
  part_done();
  return loss;
}

LossSum model_loss(LanguageModel& model, const Tensor& ids, Context& ctx,
                   std::vector<double>* position_loss, const ResidualDropout& dropout) {
  return model_loss_and_grad(model, ids, nullptr, 0.0, ctx, position_loss, false, nullptr, dropout);
}

}  // namespace ssm
