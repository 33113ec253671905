#include "ssm/layers/attention_layer.h"
#include "ssm/layers/mamba1_layer.h"
#include "ssm/layers/mamba2_layer.h"
#include "ssm/layers/mamba3_layer.h"
#include "ssm/layers/plain_mlp.h"
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
  }
  throw Error(cat("layer ", layer, ": unknown mixer kind"));
}

}  // namespace ssm
