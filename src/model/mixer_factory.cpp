#include <algorithm>

#include "ssm/layers/attention_layer.h"
#include "ssm/layers/gated_mlp.h"
#include "ssm/layers/mamba1_layer.h"
#include "ssm/layers/mamba2_layer.h"
#include "ssm/layers/mamba3_layer.h"
#include "ssm/layers/moe_mlp.h"
#include "ssm/layers/plain_mlp.h"
#include "ssm/layers/sparse_moe.h"
#include "ssm/model/language_model.h"

namespace ssm {

std::unique_ptr<SequenceLayer> make_mixer(const ModelConfig& config, int64_t layer) {
  switch (config.mixer_kind(layer)) {
    case MixerKind::kMamba1:
      return std::make_unique<Mamba1Layer>(config.mamba1);
    case MixerKind::kMamba2:
      return std::make_unique<Mamba2Layer>(config.mamba2);
    case MixerKind::kMamba3:
      return std::make_unique<Mamba3Layer>(config.mamba3);
    case MixerKind::kAttention:
      return std::make_unique<AttentionLayer>(config.attention);
    case MixerKind::kMlp:
      return std::make_unique<PlainMlp>(config.d_model, config.d_intermediate);
    case MixerKind::kMoe:
      return std::make_unique<SparseMoe>(config.sparse_moe);
  }
  throw Error(cat("layer ", layer, ": unknown mixer kind"));
}

std::unique_ptr<SequenceLayer> make_mlp(const ModelConfig& config, int64_t layer) {
  const auto& sparse = config.sparse_moe_layers;
  if (std::find(sparse.begin(), sparse.end(), layer) != sparse.end())
    return std::make_unique<SparseMoe>(config.sparse_moe);
  if (!config.has_mlp()) return nullptr;
  if (config.moe_mlp) return std::make_unique<MoeMlp>(config.moe);
  auto mlp = std::make_unique<GatedMlp>(config.d_model, config.mlp_hidden(), config.hf_mlp);
  mlp->set_multipliers(config.mlp_gate_multiplier, config.mlp_down_multiplier);
  return mlp;
}

}  // namespace ssm
