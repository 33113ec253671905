#include "ssm/model/language_model.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "ops/tensor_data.h"
#include "ssm/core/log.h"
#include "ssm/layers/attention_layer.h"

namespace ssm {

LanguageModel::LanguageModel(ModelConfig config) : config_(std::move(config)) {
  const int64_t D = config_.d_model;
  embedding_ = Param{config_.embedding_name(), {config_.padded_vocab(), D}, ParamRole::kWeight, {}};
  norm_f_ = Param{config_.names.final_norm, {D}, ParamRole::kNoDecay, {}};
  lm_head_ = Param{"lm_head.weight", {config_.padded_vocab(), D}, ParamRole::kWeight, {}};
  for (int64_t b = 0; b < config_.shared_blocks; ++b)
    shared_blocks_.push_back(std::make_unique<SharedAttentionBlock>(config_.shared_block));
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    auto block = std::make_unique<Block>();
    if (const int64_t use = config_.shared_use(i); use >= 0)
      block->shared = std::make_unique<SharedBlockUse>(*shared_blocks_.at(use % config_.shared_blocks), use);
    const std::string prefix = config_.layer_prefix(i);
    block->norm = Param{prefix + config_.names.mixer_norm, {D}, ParamRole::kNoDecay, {}};
    block->mixer = make_mixer(config_, i);
    if (config_.parallel_attention) block->parallel = std::make_unique<AttentionLayer>(config_.attention);
    block->mlp = make_mlp(config_, i);
    if (block->mlp) block->norm2 = Param{prefix + config_.names.mlp_norm, {D}, ParamRole::kNoDecay, {}};
    blocks_.push_back(std::move(block));
  }
}

LanguageModel::~LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;

void LanguageModel::to_device(Device device) {
  for_each_param([&](const std::string&, Param& p) {
    if (p.value.defined() && p.value.device() != device) p.value = p.value.to(device);
  });
}

void LanguageModel::for_each_param(const std::function<void(const std::string&, Param&)>& fn) {
  fn(embedding_.name, embedding_);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Block& b = *blocks_[i];
    const std::string prefix = config_.layer_prefix(i), mixer = config_.mixer_prefix(i);
    if (b.shared) {
      // A shared block's weights, its adapter lists included, are stored
      // once, at its first use's layer; each use's linear at its own.
      const int64_t use = config_.shared_use(i);
      const std::string layer = cat(config_.names.layers, i, ".");
      const std::string home = cat(config_.names.layers, config_.shared_block_layers[use % config_.shared_blocks], ".");
      if (use < config_.shared_blocks)
        for (Param& p : shared_blocks_[use]->parameters()) fn(home + "shared_transformer." + p.name, p);
      for (Param& p : b.shared->parameters())
        fn((p.name.rfind("shared_transformer.", 0) == 0 ? home : layer) + p.name, p);
    }
    fn(b.norm.name, b.norm);
    for (Param& p : b.mixer->parameters()) fn(mixer + p.name, p);
    if (b.parallel)
      for (Param& p : b.parallel->parameters()) fn(prefix + config_.names.attention + p.name, p);
    if (b.mlp) {
      fn(b.norm2.name, b.norm2);
      for (Param& p : b.mlp->parameters()) fn(prefix + config_.names.mlp + p.name, p);
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

namespace {

// The 2-D weights: in/out projections, MLP and attention projections, the
// embedding and head; what --dtype converts.
bool is_projection(const Param& p) { return p.role == ParamRole::kWeight && p.shape.size() == 2; }

// The dtypes the projections can compute in.
void check_projection_dtype(DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 && dtype != DType::kQ8)
    throw Error(cat("weights cannot be converted to ", dtype_name(dtype),
                    " (F32, F16, BF16 or Q8)"));
}

// A projection of the source converted to dtype a block of rows at a time,
// the source's pages released after each block: the peak is the converted
// tensor plus one block, not plus the whole F32 tensor (a 130m model's
// embedding is 154 MB in F32, and it set the peak of an int8 load).
Tensor convert_releasing(const Tensor& t, DType dtype, const TensorSource& source,
                         const std::string& name) {
  constexpr size_t kBlockBytes = size_t{8} << 20;
  const int64_t R = t.dim(0), C = t.cols();
  const auto in_row = static_cast<size_t>(C) * dtype_size(t.dtype());
  const int64_t block = std::max<int64_t>(1, static_cast<int64_t>(kBlockBytes / std::max<size_t>(in_row, 1)));
  if (R <= block) {
    Tensor out = t.to_dtype(dtype);
    source.release(name);
    return out;
  }
  Tensor out = Tensor::empty(dtype, t.shape());
  const auto out_row = static_cast<size_t>(C) * dtype_size(dtype);
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t r1 = std::min(R, r0 + block);
    const Tensor part = t.rows(r0, r1).to_dtype(dtype);  // Q8 scales are per row: the same values
    std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(r0) * out_row, part.raw(),
                static_cast<size_t>(r1 - r0) * out_row);
    if (dtype == DType::kQ8)
      std::memcpy(ops::elements<float>(out.scales()) + r0, part.scales().raw(),
                  static_cast<size_t>(r1 - r0) * sizeof(float));
    source.release(name);  // the rows not read yet are not resident: nothing lost
  }
  return out;
}

// Fills every parameter of model from source, checking names and shapes.
// Aligned F32 tensors stay in the source's (copy-on-write) mapping, and so
// do the projection matrices (2-D weights, as convert_projections takes
// them) stored in `keep` (BF16 or F16): a checkpoint in the dtype the model
// computes with is used where it is mapped, without a copy. Other
// projections are converted to `keep` here, one at a time, and the rest is
// widened to F32. The source's bytes of every tensor copied are released
// at once: otherwise the pages read stay resident as long as any borrowed
// tensor keeps the mapping alive (an F32 checkpoint run in BF16 would hold
// its F32 weights and their BF16 copies), and the peak stays one tensor
// above the converted model.
// Returns the bytes of 16-bit projections it widened to F32, and their dtype.
std::pair<uint64_t, DType> fill_parameters(LanguageModel& model, const TensorSource& source, DType keep) {
  std::set<std::string> used;
  uint64_t widened = 0;
  DType stored = DType::kBF16;
  model.for_each_param([&](const std::string& name, Param& p) {
    std::optional<Tensor> t = source.find(name);
    if (!t) throw Error(cat(source.describe(), ": missing tensor '", name, "' (shape ",
                            shape_str(p.shape), ")"));
    if (t->shape() != p.shape)
      throw Error(cat(source.describe(), ": tensor '", name, "' has shape ", shape_str(t->shape()),
                      ", the config implies ", shape_str(p.shape)));
    if (t->dtype() == DType::kI32 || t->dtype() == DType::kI64)
      throw Error(cat(source.describe(), ": tensor '", name, "' has integer dtype ",
                      dtype_name(t->dtype()), ", expected a floating type"));
    const bool aligned = reinterpret_cast<uintptr_t>(t->raw()) % dtype_size(t->dtype()) == 0;
    const bool projection = is_projection(p);
    const bool convert = projection && keep != DType::kF32 && t->dtype() != keep;
    const bool kept = !convert && (t->dtype() == DType::kF32 ||
                                   (projection && (keep == DType::kBF16 || keep == DType::kF16)));
    if (kept && aligned) {
      p.value = *t;
    } else {
      if (convert) {
        p.value = convert_releasing(*t, keep, source, name);
      } else {
        if (projection && (t->dtype() == DType::kBF16 || t->dtype() == DType::kF16)) {
          widened += t->nbytes();
          stored = t->dtype();
        }
        p.value = t->to_f32();
        source.release(name);
      }
    }
    used.insert(name);
  });
  std::vector<std::string> extra;
  for (const std::string& name : source.names())
    if (!used.count(name) && name != "lm_head.weight") extra.push_back(name);
  if (!extra.empty())
    log_warning(source.describe(), ": ", extra.size(), " tensors not used by the model, e.g. '",
                extra.front(), "'");
  return {widened, stored};
}

}  // namespace

void LanguageModel::load_weights(const TensorSource& source) { fill_parameters(*this, source, DType::kF32); }

void LanguageModel::convert_projections(DType dtype) {
  check_projection_dtype(dtype);
  if (dtype == DType::kF32) return;
  for_each_param([&](const std::string&, Param& p) {
    if (is_projection(p) && p.value.defined() && p.value.dtype() != dtype)
      p.value = p.value.to_dtype(dtype);
  });
}

DType LanguageModel::projection_dtype() {
  DType dtype = DType::kF32;
  bool found = false;
  for_each_param([&](const std::string&, Param& p) {
    if (!found && is_projection(p) && p.value.defined()) {
      dtype = p.value.dtype();
      found = true;
    }
  });
  return dtype;
}

LanguageModel::AutoWeights LanguageModel::auto_weights(const TensorSource& source) {
  std::set<DType> stored;
  for_each_param([&](const std::string& name, Param& p) {
    if (!is_projection(p)) return;
    // A missing tensor is fill_parameters' error to name.
    if (const std::optional<Tensor> t = source.find(name)) stored.insert(t->dtype());
  });
  AutoWeights out{.dtype = DType::kF32, .stored = {stored.begin(), stored.end()}};
  if (stored.size() == 1) {
    const DType only = *stored.begin();
    if (only == DType::kBF16 || only == DType::kF16) out.dtype = only;
  }
  return out;
}

LanguageModel LanguageModel::load(const std::filesystem::path& model_dir, const LoadOptions& options) {
  ModelConfig config = load_model_config(model_dir / "config.json");
  const uint64_t limit = memory_limit(options);
  // From the config alone first, so that absurd layer counts are refused
  // before the layers are built (building them allocates no weights, so up
  // to the physical memory it is safe, and the exact need is what a user can
  // act on); then exactly, before weights are read.
  const uint64_t lower_bound = min_model_bytes(config);
  if (lower_bound > std::max(limit, memory_limit({}))) check_memory_budget(lower_bound, limit, model_dir.string());
  LanguageModel model(std::move(config));
  // An explicit dtype is checked before the checkpoint is opened; auto reads
  // the stored dtypes from the checkpoint's headers.
  std::unique_ptr<TensorSource> source;
  DType weights = DType::kF32;
  if (options.weights) {
    weights = *options.weights;
  } else {
    source = open_checkpoint(model_dir);
    weights = model.auto_weights(*source).dtype;
  }
  check_projection_dtype(weights);
  check_memory_budget(model_memory_bytes(model, weights), limit, model_dir.string());
  if (!source) source = open_checkpoint(model_dir);
  const auto [widened, stored] = fill_parameters(model, *source, weights);
  // Auto widens 16-bit projections only where the storage is mixed: say what
  // that costs and how to avoid it. An explicit f32 was asked for.
  if (widened > 0 && !options.weights)
    log_warning(model_dir.string(), ": projections stored in several dtypes; ",
                format_bytes(widened), " of ", dtype_name(stored),
                " projection weights widened to F32 (", format_bytes(2 * widened), "); --dtype ",
                stored == DType::kBF16 ? "bf16" : "f16", " computes with them as stored");
  model.convert_projections(weights);
  model.set_state_dtype(options.state_dtype);
  return model;
}

void LanguageModel::set_wsla(bool on) {
  for (auto& b : blocks_) {
    b->mixer->set_wsla(on);
    if (b->parallel) b->parallel->set_wsla(on);
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

}  // namespace ssm
