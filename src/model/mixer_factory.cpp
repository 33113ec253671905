#include "ssm/layers/mamba2_layer.h"
#include "ssm/model/language_model.h"

namespace ssm {

std::unique_ptr<SequenceLayer> make_mixer(const ModelConfig& config, int64_t layer) {
  switch (config.mixer_kind(layer)) {
    case MixerKind::kMamba2: return std::make_unique<Mamba2Layer>(config.mamba2);
    case MixerKind::kMamba3:
      throw Error(cat("layer ", layer, ": Mamba-3 mixers are not supported yet"));
    case MixerKind::kAttention:
      throw Error(cat("layer ", layer, ": attention mixers are not supported yet"));
  }
  throw Error(cat("layer ", layer, ": unknown mixer kind"));
}

}  // namespace ssm
