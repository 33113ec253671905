#include "ssm/model/language_model.h"

#include <cstdint>
#include <cstring>
#include <set>

#include "ssm/core/log.h"
#include "ssm/layers/attention_layer.h"
#include "ssm/layers/gated_mlp.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

struct LanguageModel::Block {
  Param norm;
  std::unique_ptr<SequenceLayer> mixer;
  Param norm2;
  std::unique_ptr<SequenceLayer> mlp;  // null without d_intermediate
};

// Per-batch activations of step(), (B, D) each, plus the logits (B, V).
struct LanguageModel::StepBuffers {
  int64_t batch = 0;
  Tensor h, normed, out, logits;
};

LanguageModel::LanguageModel(ModelConfig config) : config_(std::move(config)) {
  const int64_t D = config_.d_model;
  embedding_ = Param{config_.embedding_name(), {config_.padded_vocab(), D}, ParamRole::kWeight, {}};
  norm_f_ = Param{"backbone.norm_f.weight", {D}, ParamRole::kNoDecay, {}};
  lm_head_ = Param{"lm_head.weight", {config_.padded_vocab(), D}, ParamRole::kWeight, {}};
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    auto block = std::make_unique<Block>();
    const std::string prefix = config_.layer_prefix(i);
    block->norm = Param{prefix + "norm.weight", {D}, ParamRole::kNoDecay, {}};
    block->mixer = make_mixer(config_, i);
    if (config_.has_mlp()) {
      block->norm2 = Param{prefix + "norm2.weight", {D}, ParamRole::kNoDecay, {}};
      block->mlp = std::make_unique<GatedMlp>(D, config_.mlp_hidden());
    }
    mixers_.push_back(block->mixer.get());
    blocks_.push_back(std::move(block));
  }
}

LanguageModel::~LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;

void LanguageModel::for_each_param(const std::function<void(const std::string&, Param&)>& fn) {
  fn(embedding_.name, embedding_);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Block& b = *blocks_[i];
    const std::string prefix = config_.layer_prefix(i);
    fn(b.norm.name, b.norm);
    for (Param& p : b.mixer->parameters()) fn(prefix + "mixer." + p.name, p);
    if (b.mlp) {
      fn(b.norm2.name, b.norm2);
      for (Param& p : b.mlp->parameters()) fn(prefix + "mlp." + p.name, p);
    }
  }
  fn(norm_f_.name, norm_f_);
  if (!config_.tie_embeddings) fn(lm_head_.name, lm_head_);
}

SequenceLayer* LanguageModel::mlp(int64_t layer) { return blocks_.at(layer)->mlp.get(); }

int64_t LanguageModel::parameter_count() {
  int64_t n = 0;
  for_each_param([&](const std::string&, Param& p) { n += shape_numel(p.shape); });
  return n;
}

void LanguageModel::load_weights(const TensorSource& source) {
  std::set<std::string> used;
  for_each_param([&](const std::string& name, Param& p) {
    std::optional<Tensor> t = source.find(name);
    if (!t) throw Error(cat(source.describe(), ": missing tensor '", name, "' (shape ",
                            shape_str(p.shape), ")"));
    if (t->shape() != p.shape)
      throw Error(cat(source.describe(), ": tensor '", name, "' has shape ", shape_str(t->shape()),
                      ", the config implies ", shape_str(p.shape)));
    if (t->dtype() == DType::kI32 || t->dtype() == DType::kI64)
      throw Error(cat(source.describe(), ": tensor '", name, "' has integer dtype ",
                      dtype_name(t->dtype()), ", expected a floating type"));
    const bool aligned = reinterpret_cast<uintptr_t>(t->raw()) % alignof(float) == 0;
    // Aligned F32 stays in the (copy-on-write) mapping; the rest is widened.
    p.value = (t->dtype() == DType::kF32 && aligned) ? *t : t->to_f32();
    used.insert(name);
  });
  std::vector<std::string> extra;
  for (const std::string& name : source.names())
    if (!used.count(name) && name != "lm_head.weight") extra.push_back(name);
  if (!extra.empty())
    log_warning(source.describe(), ": ", extra.size(), " tensors not used by the model, e.g. '",
                extra.front(), "'");
}

LanguageModel LanguageModel::load(const std::filesystem::path& model_dir, const LoadOptions& options) {
  ModelConfig config = load_model_config(model_dir / "config.json");
  const uint64_t limit = memory_limit(options);
  // From the config alone first, so that absurd layer counts are refused
  // before the layers are built; then exactly, before weights are read.
  check_memory_budget(min_model_bytes(config), limit, model_dir.string());
  LanguageModel model(std::move(config));
  check_memory_budget(model_memory_bytes(model), limit, model_dir.string());
  model.load_weights(*open_checkpoint(model_dir));
  return model;
}

ModelState LanguageModel::make_state(int64_t batch) const {
  ModelState s;
  s.batch = batch;
  for (const auto& b : blocks_) s.layers.push_back(b->mixer->make_state(batch));
  return s;
}

Tensor LanguageModel::forward(const Tensor& ids, ModelState* state, Context& ctx, bool last_only,
                              ForwardTrace* trace) {
  if (ids.ndim() != 2) throw Error(cat("input_ids must be (batch, length), got ", shape_str(ids.shape())));
  const int64_t B = ids.dim(0), L = ids.dim(1), D = config_.d_model, rows = B * L;
  if (state && state->batch != B)
    throw Error(cat("state holds ", state->batch, " sequences but the input has ", B));
  if (L == 0) throw Error("input_ids has length 0");
  ThreadPool& pool = ctx.pool();

  Tensor h = Tensor::empty(DType::kF32, {B, L, D});
  Tensor normed = Tensor::empty(DType::kF32, {B, L, D});
  Tensor out = Tensor::empty(DType::kF32, {B, L, D});
  const float* emb = embedding_.value.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t tok;
    if (ids.dtype() == DType::kI64) tok = ids.data<int64_t>()[r];
    else if (ids.dtype() == DType::kI32) tok = ids.data<int32_t>()[r];
    else throw Error(cat("input_ids must be I64 or I32, got ", dtype_name(ids.dtype())));
    if (tok < 0 || tok >= config_.vocab_size)
      throw Error(cat("token id ", tok, " at position ", r, " is outside the vocabulary [0, ",
                      config_.vocab_size, ")"));
    std::memcpy(h.data<float>() + r * D, emb + tok * D, D * sizeof(float));
  }
  if (trace) *trace = ForwardTrace{};

  float* hp = h.data<float>();
  const float eps = config_.norm_eps;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Block& b = *blocks_[i];
    ops::rms_norm(hp, b.norm.value.data<float>(), rows, D, eps, normed.data<float>(), pool);
    b.mixer->forward(normed, out, state ? state->layers[i].get() : nullptr, ctx);
    if (trace) {
      trace->mixer_in.push_back(normed.clone());
      trace->mixer_out.push_back(out.clone());
    }
    for (int64_t k = 0; k < rows * D; ++k) hp[k] += out.data<float>()[k];
    if (b.mlp) {
      ops::rms_norm(hp, b.norm2.value.data<float>(), rows, D, eps, normed.data<float>(), pool);
      b.mlp->forward(normed, out, nullptr, ctx);
      for (int64_t k = 0; k < rows * D; ++k) hp[k] += out.data<float>()[k];
    }
    if (trace) trace->hidden.push_back(h.clone());
  }
  if (state) state->position += L;

  // Only the rows whose logits are wanted go through norm_f and the head.
  const int64_t out_rows = last_only ? B : rows;
  Tensor final_in = Tensor::empty(DType::kF32, {out_rows, D});
  for (int64_t r = 0; r < out_rows; ++r) {
    const int64_t src = last_only ? r * L + (L - 1) : r;
    std::memcpy(final_in.data<float>() + r * D, hp + src * D, D * sizeof(float));
  }
  ops::rms_norm(final_in.data<float>(), norm_f_.value.data<float>(), out_rows, D, eps,
                final_in.data<float>(), pool);
  if (trace) trace->hidden.push_back(final_in.reshape({B, last_only ? 1 : L, D}).clone());
  const Param& head = config_.tie_embeddings ? embedding_ : lm_head_;
  const int64_t V = config_.vocab_size;
  Tensor logits = Tensor::empty(DType::kF32, {B, last_only ? 1 : L, V});
  ops::linear(final_in.data<float>(), out_rows, D, head.value.data<float>(), V, nullptr,
              logits.data<float>(), pool);
  return logits;
}

void LanguageModel::set_wsla(bool on) {
  for (auto& b : blocks_) {
    b->mixer->set_wsla(on);
    if (b->mlp) b->mlp->set_wsla(on);
  }
}

std::vector<TrainableSlice> LanguageModel::trainable_parameters() {
  std::vector<TrainableSlice> out;
  const bool wsla = !blocks_.empty() && blocks_.front()->mixer->wsla();
  if (!wsla) {
    for_each_param([&](const std::string&, Param& p) { out.push_back({&p, 0, p.shape[0]}); });
    return out;
  }
  for (auto& b : blocks_)
    for (const TrainableSlice& s : b->mixer->trainable_parameters()) out.push_back(s);
  return out;
}

// ---- Decoding -------------------------------------------------------------

Tensor& LanguageModel::step(const int64_t* tokens, ModelState& state, Context& ctx) {
  const int64_t B = state.batch, D = config_.d_model, V = config_.vocab_size;
  if (!step_buffers_) step_buffers_ = std::make_unique<StepBuffers>();
  StepBuffers& sb = *step_buffers_;
  if (sb.batch != B) {
    sb.batch = B;
    sb.h = Tensor::empty(DType::kF32, {B, D});
    sb.normed = Tensor::empty(DType::kF32, {B, D});
    sb.out = Tensor::empty(DType::kF32, {B, D});
    sb.logits = Tensor::empty(DType::kF32, {B, V});
  }
  ThreadPool& pool = ctx.pool();
  float* hp = sb.h.data<float>();
  const float* emb = embedding_.value.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    if (tokens[b] < 0 || tokens[b] >= V)
      throw Error(cat("token id ", tokens[b], " of sequence ", b,
                      " is outside the vocabulary [0, ", V, ")"));
    std::memcpy(hp + b * D, emb + tokens[b] * D, D * sizeof(float));
  }
  const float eps = config_.norm_eps;
  const float* outp = sb.out.data<float>();
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Block& blk = *blocks_[i];
    ops::rms_norm(hp, blk.norm.value.data<float>(), B, D, eps, sb.normed.data<float>(), pool);
    LayerState* ls = state.layers[i].get();
    SSM_CHECK(ls, "layer ", i, " has no decode state");
    blk.mixer->step(sb.normed, sb.out, *ls, ctx);
    for (int64_t k = 0; k < B * D; ++k) hp[k] += outp[k];
    if (blk.mlp) {
      ops::rms_norm(hp, blk.norm2.value.data<float>(), B, D, eps, sb.normed.data<float>(), pool);
      blk.mlp->forward(sb.normed, sb.out, nullptr, ctx);  // stateless: one row per sequence
      for (int64_t k = 0; k < B * D; ++k) hp[k] += outp[k];
    }
  }
  state.position += 1;
  ops::rms_norm(hp, norm_f_.value.data<float>(), B, D, eps, sb.normed.data<float>(), pool);
  const Param& head = config_.tie_embeddings ? embedding_ : lm_head_;
  ops::linear(sb.normed.data<float>(), B, D, head.value.data<float>(), V, nullptr,
              sb.logits.data<float>(), pool);
  return sb.logits;
}

namespace {

// A KV cache row: the sequence's valid rows of every head, and its length.
void copy_cache_row(AttentionState& dst, int64_t dst_row, const AttentionState& src, int64_t src_row) {
  const int64_t len = src.length(src_row), Hkv = src.k.dim(1), hd = src.k.dim(3);
  dst.reserve(len);
  const int64_t dcap = dst.capacity(), scap = src.capacity();
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t d = ((dst_row * Hkv + h) * dcap) * hd, s = ((src_row * Hkv + h) * scap) * hd;
    std::memcpy(dst.k.data<float>() + d, src.k.data<float>() + s, len * hd * sizeof(float));
    std::memcpy(dst.v.data<float>() + d, src.v.data<float>() + s, len * hd * sizeof(float));
  }
  dst.lengths.data<int64_t>()[dst_row] = len;
}

}  // namespace

void reserve_state(ModelState& state, int64_t max_len) {
  for (auto& l : state.layers)
    if (auto* a = dynamic_cast<AttentionState*>(l.get())) a->reserve(max_len);
}

void copy_state_row(ModelState& dst, int64_t dst_row, ModelState& src, int64_t src_row) {
  SSM_CHECK(dst.layers.size() == src.layers.size(), "states of different models");
  SSM_CHECK(dst_row >= 0 && dst_row < dst.batch && src_row >= 0 && src_row < src.batch,
            "row out of range");
  for (size_t i = 0; i < dst.layers.size(); ++i) {
    if (!dst.layers[i]) continue;
    if (auto* cache = dynamic_cast<AttentionState*>(dst.layers[i].get())) {
      copy_cache_row(*cache, dst_row, dynamic_cast<AttentionState&>(*src.layers[i]), src_row);
      continue;
    }
    auto d = dst.layers[i]->tensors();
    auto s = src.layers[i]->tensors();
    SSM_CHECK(d.size() == s.size(), "layer ", i, " states differ");
    for (size_t j = 0; j < d.size(); ++j) {
      Tensor& dt = *d[j].second;
      const Tensor& st = *s[j].second;
      const size_t row_bytes = dt.nbytes() / static_cast<size_t>(dst.batch);
      SSM_CHECK(st.nbytes() / static_cast<size_t>(src.batch) == row_bytes, "layer ", i, " state '",
                d[j].first, "' rows differ: ", shape_str(dt.shape()), " vs ", shape_str(st.shape()));
      std::memcpy(static_cast<char*>(dt.raw()) + dst_row * row_bytes,
                  static_cast<const char*>(st.raw()) + src_row * row_bytes, row_bytes);
    }
  }
}

}  // namespace ssm
