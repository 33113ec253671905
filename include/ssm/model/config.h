// One description of a model for both checkpoint conventions (SPEC §2).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ssm/io/json.h"
#include "ssm/layers/mixer_config.h"

namespace ssm {

enum class MixerKind { kMamba2, kMamba3, kAttention };
enum class Convention { kStateSpaces, kHuggingFace };

struct ModelConfig {
  Convention convention = Convention::kStateSpaces;
  int64_t d_model = 0;
  int64_t n_layer = 0;
  int64_t vocab_size = 0;
  int64_t pad_vocab_size_multiple = 1;
  int64_t d_intermediate = 0;
  bool rms_norm = true;
  bool residual_in_fp32 = true;
  bool tie_embeddings = true;
  float norm_eps = 1e-5f;
  MixerKind ssm_kind = MixerKind::kMamba2;
  Mamba2Config mamba2;
  Mamba3Config mamba3;
  AttentionConfig attention;
  std::vector<int64_t> attn_layer_idx;
  Json source;  // the config.json as read, written back unchanged by convert

  int64_t padded_vocab() const {
    const int64_t m = pad_vocab_size_multiple;
    return (vocab_size + m - 1) / m * m;
  }
  MixerKind mixer_kind(int64_t layer) const;
  bool has_mlp() const { return d_intermediate > 0; }
  // d_intermediate rounded up to a multiple of 128 (SPEC §5).
  int64_t mlp_hidden() const { return (d_intermediate + 127) / 128 * 128; }
  std::string embedding_name() const;
  std::string layer_prefix(int64_t layer) const;
};

// Throws ssm::Error naming `source` and the key on missing, mistyped or
// inconsistent values.
ModelConfig parse_model_config(const Json& j, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& config_json);

}  // namespace ssm
