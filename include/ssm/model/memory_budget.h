// Memory budgets: how many bytes a model may take, checked before anything is
// allocated for it, so that a config.json claiming 10^15 parameters is an
// error rather than an attempt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ssm/model/config.h"
#include "ssm/tensor/dtype.h"

namespace ssm {

class LanguageModel;

// Host bytes a layer costs beyond its parameters (its objects and names), so
// that a config with absurdly many tiny layers is refused too.
inline constexpr uint64_t kLayerOverheadBytes = 4096;

// Limits applied while loading a model from files a stranger may have written.
struct LoadOptions {
  // Bytes the model may take: its parameters as loaded (see
  // model_memory_bytes) plus kLayerOverheadBytes per layer. 0: the
  // machine's physical memory.
  uint64_t max_memory = 0;
  // The dtype the projection weights are converted to once read (F32, F16,
  // BF16 or Q8); the checkpoint is not changed. See
  // LanguageModel::convert_projections. nullopt: the dtype they are stored
  // in (`--dtype auto`, LanguageModel::auto_weights). The library's default
  // stays F32, what training and gradients need; the commands that only
  // compute default to auto.
  std::optional<DType> weights = DType::kF32;
  // The dtype of the SSM states the model makes (LanguageModel::set_state_dtype).
  DType state_dtype = DType::kF32;
};

// "2G", "512M", "1.5GiB", "300000": bytes, with an optional binary suffix
// K, M, G or T (optionally followed by B or iB). ssm::Error for anything
// else, for zero and for more than 2^64 - 1 bytes.
uint64_t parse_memory_size(const std::string& text);

// "1.50 GiB", "512 B".
std::string format_bytes(uint64_t bytes);

// This machine's physical memory; 0 when it cannot be determined.
uint64_t physical_memory_bytes();

// options.max_memory, or the physical memory when it is 0 (no limit when
// that is unknown).
uint64_t memory_limit(const LoadOptions& options);

// A lower bound on what config's model takes, from the config alone
// (embedding, head, norms, per-layer overhead): safe to compute before any
// layer is built. Saturates at 2^64 - 1 instead of overflowing.
uint64_t min_model_bytes(const ModelConfig& config);

// What the built model's parameters take, plus the per-layer overhead,
// with its projection matrices in `projections` (as --dtype loads them; Q8
// with its row scales) and everything else in F32; saturating. Reads only
// shapes: nothing is allocated.
uint64_t model_memory_bytes(LanguageModel& model, DType projections = DType::kF32);

// What the attention layers' key and value caches add per token of one
// sequence (F32); 0 for a model without attention.
uint64_t kv_cache_bytes_per_token(const ModelConfig& config);

// ssm::Error naming `what` when needed > limit.
void check_memory_budget(uint64_t needed, uint64_t limit, const std::string& what);

}  // namespace ssm
