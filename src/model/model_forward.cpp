// The model's forward passes: prefill over whole sequences, one decode
// step, and the block loop both are made of (training runs it too).
#include "ssm/layers/attention_layer.h"
#include "ssm/layers/mamba2_layer.h"
#include "ssm/model/language_model.h"
#include "ssm/ops/dropout.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/embedding.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/mamba2_decode.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {
namespace {

int64_t id_at(const Tensor& ids, int64_t i) {
  return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
}

// The KV caches of a decode step's attention layers, in the state's order,
// or false where the step cannot be recorded: Zamba2's shared block reads
// its positions on the host, and a mixture of experts (Granite 4.0-H's,
// Nemotron-H's, Jamba's) its routing. No cache is too long to record:
// the cuda decode kernels split the keys over blocks sized by the shapes
// (their scratch grows with the batch and heads, not the cache).
bool recordable_caches(const std::vector<std::unique_ptr<LanguageModel::Block>>& blocks, ModelState& state,
                       std::vector<AttentionState*>& caches) {
  size_t i = 0;
  for (const auto& b : blocks) {
    for (const SequenceLayer* layer : {b->mixer.get(), b->mlp.get()})
      if (layer && layer->kind() == "moe") return false;
    for (const SequenceLayer* layer : {b->mixer.get(), b->parallel.get(), b->shared.get()}) {
      if (!layer) continue;
      if (i >= state.layers.size()) return false;
      auto* cache = dynamic_cast<AttentionState*>(state.layers[i++].get());
      if (!cache) continue;
      if (!dynamic_cast<const AttentionLayer*>(layer)) return false;
      caches.push_back(cache);
    }
  }
  return i == state.layers.size();
}

// Names a recorded step by every buffer it touches (FNV-1a of the
// addresses): the state's tensors (and their dtypes), the ids and logits
// buffers and the weights, so that a step on other buffers never replays
// this one.
uint64_t step_record_key(LanguageModel& model, ModelState& state, const Tensor& ids, const Tensor& logits,
                         const Tensor& positions) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  mix(static_cast<uint64_t>(state.batch));
  mix(reinterpret_cast<uintptr_t>(ids.raw()));
  mix(reinterpret_cast<uintptr_t>(logits.raw()));
  mix(reinterpret_cast<uintptr_t>(positions.defined() ? positions.raw() : nullptr));
  for (const auto& l : state.layers)
    if (l)
      for (const auto& [name, t] : l->tensors()) {
        // The dtype too (a BF16 state, --state-dtype): the kernels recorded are the dtype's.
        mix(reinterpret_cast<uintptr_t>(t->raw()));
        mix(static_cast<uint64_t>(t->dtype()));
      }
  model.for_each_param([&](const std::string&, Param& p) { mix(reinterpret_cast<uintptr_t>(p.value.raw())); });
  return h ? h : 1;
}

}  // namespace

void LanguageModel::check_ids(const Tensor& ids) const {
  if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32)
    throw Error(cat("input_ids must be I64 or I32, got ", dtype_name(ids.dtype())));
  const Tensor host = ids.device().is_host() && ids.is_dense() ? ids : ids.to(Device::host());
  for (int64_t r = 0; r < host.numel(); ++r) {
    const int64_t tok = id_at(host, r);
    if (tok < 0 || tok >= config_.vocab_size)
      throw Error(cat("token id ", tok, " at position ", r, " is outside the vocabulary [0, ",
                      config_.vocab_size, ")"));
  }
}

void LanguageModel::embed(const Tensor& ids, const Tensor& h, Context& ctx) {
  ops::embedding(ctx, {.ids = ids, .table = embedding_.value, .out = h});
  if (config_.embedding_multiplier != 1.f) ops::scale(ctx, h, config_.embedding_multiplier);
}

void LanguageModel::run_blocks(const Tensor& h, ModelState* state, Context& ctx, BlockTape* tape,
                               ForwardTrace* trace) {
  SSM_CHECK(!(state && tape), "training starts every sequence fresh");
  Arena::Scope scope(ctx.arena());
  const Tensor normed = ctx.arena().alloc(DType::kF32, h.shape());
  Tensor out = ctx.arena().alloc(DType::kF32, h.shape());
  const float eps = config_.norm_eps;
  // The tape's copies of h live where kept activations do.
  const Workspace kept(ctx, true);
  // Training's dropout, every site of it (the backward in model_grad.cpp
  // mirrors each): the embedding's output here, each layer's output in sub_block.
  const ResidualDropout drop = tape ? tape->dropout : ResidualDropout{};
  auto dropout = [&](const Tensor& t, uint64_t site) {
    ops::dropout(ctx, {.t = t, .p = drop.p, .seed = drop.seed, .step = drop.step, .site = site});
  };
  if (drop.on()) dropout(h, ResidualDropout::kEmbeddingSite);
  // h += layer(RMSNorm(h; w)), keeping what the tape asks for.
  auto sub_block = [&](SequenceLayer& layer, const Param& w, LayerState* layer_state, uint64_t site) {
    if (tape) tape->inputs.push_back(kept.copy(h));
    // Nothing kept or traced (the trace reads `out`): the layer normalises
    // and adds into h.
    if (!tape && !trace && config_.residual_multiplier == 1.f) {
      layer.forward_add_normed(h, w.value, eps, normed, layer_state, ctx);
      return;
    }
    ops::rms_norm(ctx, {.x = h, .w = w.value, .eps = eps, .out = normed});
    std::unique_ptr<LayerActivations> kept;
    layer.forward(normed, out, layer_state, ctx, tape && tape->keep_activations ? &kept : nullptr);
    if (tape) tape->activations.push_back(std::move(kept));
    if (drop.on()) dropout(out, site);
    ops::add(ctx, h, out, config_.residual_multiplier);
  };
  // Falcon-H1: h += m_ssm * mamba(n) + m_out * attention(m_in * n), n = RMSNorm(h).
  // Training: the block's input only; its backward recomputes the rest.
  auto tape_input_only = [&] {
    if (!tape) return;
    tape->inputs.push_back(kept.copy(h));
    tape->activations.push_back(nullptr);
  };
  auto parallel_block = [&](Block& b, LayerState* mixer_state, LayerState* attention_state) {
    SSM_CHECK(!drop.on(), "no dropout in parallel blocks (model_loss_and_grad refuses it)");
    tape_input_only();
    ops::rms_norm(ctx, {.x = h, .w = b.norm.value, .eps = eps, .out = normed});
    b.mixer->forward(normed, out, mixer_state, ctx);
    ops::add(ctx, h, out, config_.ssm_out_multiplier);
    if (config_.attention_in_multiplier != 1.f) ops::scale(ctx, normed, config_.attention_in_multiplier);
    b.parallel->forward(normed, out, attention_state, ctx);
    ops::add(ctx, h, out, config_.attention_out_multiplier);
  };
  // Zamba2: the shared blocks read [h | embeddings]; the embeddings are h now.
  Tensor joined;
  if (!config_.shared_block_layers.empty()) {
    if (tape) tape->embedded = kept.copy(h);
    Shape wide = h.shape();
    wide.back() *= 2;
    joined = ctx.arena().alloc(DType::kF32, wide);
    ops::copy(ctx, joined.cols(config_.d_model, 2 * config_.d_model), h);
  }
  // h += mamba(RMSNorm(h + shared(h, embeddings)))
  auto shared_block = [&](Block& b, LayerState* mixer_state, LayerState* cache) {
    SSM_CHECK(!drop.on(), "no dropout in shared blocks (model_loss_and_grad refuses it)");
    tape_input_only();
    ops::copy(ctx, joined.cols(0, config_.d_model), h);
    b.shared->forward(joined, out, cache, ctx);
    ops::add(ctx, out, h);
    ops::rms_norm(ctx, {.x = out, .w = b.norm.value, .eps = eps, .out = normed});
    b.mixer->forward(normed, out, mixer_state, ctx);
    ops::add(ctx, h, out, config_.residual_multiplier);
  };
  size_t slot = 0;  // the next layer state (see ModelState)
  auto next_state = [&]() -> LayerState* { return state ? state->layers.at(slot++).get() : nullptr; };
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Block& b = *blocks_[i];
    LayerState* mixer_state = next_state();
    if (b.parallel)
      parallel_block(b, mixer_state, next_state());
    else if (b.shared)
      shared_block(b, mixer_state, next_state());
    else
      sub_block(*b.mixer, b.norm, mixer_state, ResidualDropout::layer_site(i, false));
    if (trace) {
      trace->mixer_in.push_back(normed.clone());
      trace->mixer_out.push_back(out.clone());
    }
    if (b.mlp) sub_block(*b.mlp, b.norm2, nullptr, ResidualDropout::layer_site(i, true));
    if (trace) trace->hidden.push_back(h.clone());
  }
}

Tensor LanguageModel::forward(const Tensor& ids, ModelState* state, Context& ctx, bool last_only,
                              ForwardTrace* trace) {
  if (ids.ndim() != 2) throw Error(cat("input_ids must be (batch, length), got ", ids.shape()));
  const int64_t B = ids.dim(0), L = ids.dim(1), D = config_.d_model, V = config_.vocab_size;
  if (state && state->batch != B)
    throw Error(cat("state holds ", state->batch, " sequences but the input has ", B));
  if (L == 0) throw Error("input_ids has length 0");
  check_ids(ids);
  if (trace) *trace = ForwardTrace{};

  Arena::Scope scope(ctx.arena());
  const Tensor h = ctx.arena().alloc(DType::kF32, {B, L, D});
  embed(ids.device() == ctx.device() ? ids : ids.to(ctx.device()), h, ctx);
  run_blocks(h, state, ctx, nullptr, trace);
  if (state) state->position += L;

  // Only the rows whose logits are wanted go through norm_f and the head.
  const int64_t out_len = last_only ? 1 : L;
  const Tensor final_in = ctx.arena().alloc(DType::kF32, {B, out_len, D});
  ops::copy(ctx, final_in, last_only ? h.slice(1, L - 1, L) : h);
  ops::rms_norm(ctx, {.x = final_in, .w = norm_f_.value, .eps = config_.norm_eps, .out = final_in});
  if (trace) trace->hidden.push_back(final_in.clone());
  Tensor logits = Tensor::empty(DType::kF32, {B, out_len, V}, ctx.device());
  ops::linear(ctx, {.x = final_in, .W = head().value.rows(0, V), .y = logits});
  if (config_.logits_scaling != 1.f) ops::scale(ctx, logits, 1.f / config_.logits_scaling);
  return logits;
}

Tensor& LanguageModel::step(const int64_t* tokens, ModelState& state, Context& ctx) {
  const int64_t B = state.batch, V = config_.vocab_size;
  for (int64_t b = 0; b < B; ++b)
    if (tokens[b] < 0 || tokens[b] >= V)
      throw Error(cat("token id ", tokens[b], " of sequence ", b,
                      " is outside the vocabulary [0, ", V, ")"));
  if (!step_logits_.defined() || step_logits_.dim(0) != B || step_logits_.device() != ctx.device())
    step_logits_ = Tensor::empty(DType::kF32, {B, (V + 7) / 8 * 8}, ctx.device()).cols(0, V);

  Arena::Scope scope(ctx.arena());
  if (ctx.device().is_host()) {
    // The caller's ids, borrowed: nothing to free, nothing allocated.
    step_body(Tensor::borrow(nullptr, const_cast<int64_t*>(tokens), DType::kI64, {B}), state, ctx);
  } else {
    // On a device the ids go to a buffer of the model's, and the step, the
    // same ops on the same buffers every token, is recorded once and
    // replayed (a CUDA graph) where the backend can.
    if (!step_ids_.defined() || step_ids_.dim(0) != B || step_ids_.device() != ctx.device())
      step_ids_ = Tensor::empty(DType::kI64, {B}, ctx.device());
    // The key first: walking every parameter takes the host about 16 us
    // (130m Mamba-2), here where it overlaps the device's previous step when
    // the caller has not waited for it.
    BackendResources* rec = ctx.resources();
    const uint64_t key = rec && stage_step_positions(state, ctx, *rec)
                             ? step_record_key(*this, state, step_ids_, step_logits_, step_positions_)
                             : 0;
    // Queued behind the previous step where the backend can (a pinned
    // staging copy on its stream); a plain copy waits for that step first.
    const size_t id_bytes = sizeof(int64_t) * static_cast<size_t>(B);
    if (!(rec && rec->copy_from_host_queued(step_ids_.raw(), tokens, id_bytes)))
      device_memory(ctx.device()).copy_from_host(ctx.device(), step_ids_.raw(), tokens, id_bytes);
    if (key && rec->replay(key)) {
      // The recorded layers' forwards did not run on the host: their caches'
      // lengths move on here.
      for (auto& l : state.layers)
        if (auto* cache = dynamic_cast<AttentionState*>(l.get())) {
          for (int64_t b = 0; b < B; ++b) cache->lengths.data<int64_t>()[b] += 1;
          cache->lengths_on_device = Tensor();
        }
    } else {
      const bool record = key && rec->should_record(key);
      if (record) rec->begin_record();
      try {
        step_body(step_ids_, state, ctx);
      } catch (...) {
        if (record) rec->abandon_record();
        throw;
      }
      if (record) rec->end_record(key);
    }
  }
  state.position += 1;
  return step_logits_;
}

void LanguageModel::step_body(const Tensor& ids, ModelState& state, Context& ctx) {
  const int64_t B = state.batch, D = config_.d_model, V = config_.vocab_size;
  const Tensor h = ctx.arena().alloc(DType::kF32, {B, 1, D});
  embed(ids, h, ctx);
  if (!step_blocks_as_stack(h, state, ctx)) run_blocks(h, &state, ctx);
  ops::rms_norm(ctx, {.x = h, .w = norm_f_.value, .eps = config_.norm_eps, .out = h});
  ops::linear(ctx, {.x = h.reshape({B, D}), .W = head().value.rows(0, V), .y = step_logits_});
  if (config_.logits_scaling != 1.f) ops::scale(ctx, step_logits_, 1.f / config_.logits_scaling);
}

bool LanguageModel::stage_step_positions(ModelState& state, Context& ctx, BackendResources& rec) {
  std::vector<AttentionState*> caches;
  for (auto& l : state.layers)  // a step that threw may have left them
    if (auto* cache = dynamic_cast<AttentionState*>(l.get())) cache->lengths_on_device = Tensor();
  if (!recordable_caches(blocks_, state, caches)) return false;
  if (caches.empty()) return true;
  const int64_t B = state.batch, n = static_cast<int64_t>(caches.size());
  for (AttentionState* cache : caches)
    cache->ensure_room(ctx, 1);  // before the key: a grown cache is a new recording
  if (!step_positions_.defined() || step_positions_.numel() != n * B || step_positions_.device() != ctx.device())
    step_positions_ = Tensor::empty(DType::kI64, {n, B}, ctx.device());
  step_positions_host_.resize(static_cast<size_t>(n * B));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t b = 0; b < B; ++b) step_positions_host_[static_cast<size_t>(c * B + b)] = caches[c]->length(b);
  const size_t bytes = sizeof(int64_t) * step_positions_host_.size();
  if (!rec.copy_from_host_queued(step_positions_.raw(), step_positions_host_.data(), bytes))
    device_memory(ctx.device()).copy_from_host(ctx.device(), step_positions_.raw(), step_positions_host_.data(), bytes);
  for (int64_t c = 0; c < n; ++c) caches[c]->lengths_on_device = step_positions_.slice(0, c, c + 1).reshape({B});
  return true;
}

bool LanguageModel::step_blocks_as_stack(const Tensor& h, ModelState& state, Context& ctx) {
  if (!ops::has_mamba2_decode_stack(ctx) || config_.residual_multiplier != 1.f ||
      !config_.shared_block_layers.empty() || blocks_.empty() || state.layers.size() != blocks_.size())
    return false;
  ops::Mamba2DecodeStackArgs args{.eps = config_.norm_eps, .h = h};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = *blocks_[i];
    const auto* m = dynamic_cast<const Mamba2Layer*>(b.mixer.get());
    ops::Mamba2StackLayer layer;
    if (!m || b.parallel || b.shared || b.mlp ||
        !m->decode_stack_layer(b.norm.value, state.layers[i].get(), layer))
      return false;
    const Mamba2Config& c = m->config();
    args.groups = c.ngroups;
    args.norm_group = c.d_inner() / c.ngroups;
    args.norm_before_gate = c.norm_before_gate;
    args.gate_eps = c.norm_eps;
    args.dt_min = static_cast<float>(c.dt_limit_lo);
    args.dt_max = static_cast<float>(c.dt_limit_hi);
    args.layers.push_back(std::move(layer));
  }
  ops::mamba2_decode_stack(ctx, args);
  return true;
}

}  // namespace ssm
