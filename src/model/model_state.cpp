// The recurrent state of a batch of sequences: making it, copying one
// sequence's rows between states, and growing KV caches ahead of decoding.
#include "ssm/layers/attention_layer.h"
#include "ssm/model/language_model.h"
#include "ssm/ops/elementwise.h"

namespace ssm {
namespace {

// A KV cache row: the sequence's valid rows of every head, and its length.
void copy_cache_row(AttentionState& dst, int64_t dst_row, const AttentionState& src,
                    int64_t src_row, Context& ctx) {
  const int64_t len = src.length(src_row);
  dst.reserve(ctx, len);
  for (const auto& [d, s] : {std::pair{&dst.k, &src.k}, std::pair{&dst.v, &src.v}})
    ops::copy(ctx, d->index(dst_row).slice(1, 0, len), s->index(src_row).slice(1, 0, len));
  dst.lengths.data<int64_t>()[dst_row] = len;
}

}  // namespace

ModelState LanguageModel::make_state(int64_t batch) const {
  ModelState s;
  s.batch = batch;
  // States live where the weights do.
  const Device device = embedding_.value.defined() ? embedding_.value.device() : Device::host();
  for (const auto& b : blocks_) {
    s.layers.push_back(b->mixer->make_state(batch, device));
    if (b->parallel) s.layers.push_back(b->parallel->make_state(batch, device));
    if (b->shared) s.layers.push_back(b->shared->make_state(batch, device));
  }
  return s;
}

void LanguageModel::set_state_dtype(DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    throw Error(cat("a state dtype must be F32 or BF16, not ", dtype_name(dtype)));
  state_dtype_ = dtype;
  for (const auto& b : blocks_)
    for (SequenceLayer* l : {b->mixer.get(), b->parallel.get(), b->shared.get()})
      if (l) l->set_state_dtype(dtype);
}

void reserve_state(ModelState& state, int64_t max_len, Context& ctx) {
  for (auto& l : state.layers)
    if (auto* a = dynamic_cast<AttentionState*>(l.get())) a->reserve(ctx, max_len);
}

void copy_state_row(ModelState& dst, int64_t dst_row, ModelState& src, int64_t src_row,
                    Context& ctx) {
  SSM_CHECK(dst.layers.size() == src.layers.size(), "states of different models");
  SSM_CHECK(dst_row >= 0 && dst_row < dst.batch && src_row >= 0 && src_row < src.batch,
            "row out of range");
  for (size_t i = 0; i < dst.layers.size(); ++i) {
    if (!dst.layers[i]) continue;
    if (auto* cache = dynamic_cast<AttentionState*>(dst.layers[i].get())) {
      copy_cache_row(*cache, dst_row, dynamic_cast<AttentionState&>(*src.layers[i]), src_row, ctx);
      continue;
    }
    auto d = dst.layers[i]->tensors();
    auto s = src.layers[i]->tensors();
    SSM_CHECK(d.size() == s.size(), "layer ", i, " states differ");
    for (size_t j = 0; j < d.size(); ++j) {
      const Tensor dr = d[j].second->index(dst_row), sr = s[j].second->index(src_row);
      SSM_CHECK(dr.shape() == sr.shape(), "layer ", i, " state '", d[j].first,
                "' rows differ: ", d[j].second->shape(), " vs ", s[j].second->shape());
      ops::copy(ctx, dr, sr);
    }
  }
}

}  // namespace ssm
