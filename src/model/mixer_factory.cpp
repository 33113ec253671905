#include "ssm/layers/attention_layer.h"
#include "ssm/layers/mamba2_layer.h"
#include "ssm/layers/mamba3_layer.h"
#include "ssm/model/language_model.h"

namespace ssm {

std::unique_ptr<SequenceLayer> make_mixer(const ModelConfig& config, int64_t layer) {
  switch (config.mixer_kind(layer)) {
    case MixerKind::kMamba2:
      return std::make_unique<Mamba2Layer>(config.mamba2);
    case MixerKind::kMamba3:
      return std::make_unique<Mamba3Layer>(config.mamba3);
    case MixerKind::kAttention:
      return std::make_unique<AttentionLayer>(config.attention);
  }
  throw Error(cat("layer ", layer, ": unknown mixer kind"));
}

}  // namespace ssm
