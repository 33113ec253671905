// One description of a model for both checkpoint conventions (SPEC §2).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ssm/io/json.h"
#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sparse_moe_config.h"

namespace ssm {

// kMlp: an MLP as a layer of its own (Nemotron-H), in the mixer's place;
// kMoe likewise a mixture of experts (Nemotron-H's MoE layers, sparse_moe).
enum class MixerKind { kMamba1, kMamba2, kMamba3, kAttention, kMlp, kMoe };
enum class Convention { kStateSpaces, kHuggingFace };

// Where each parameter lives in the checkpoint: state-spaces' names, or
// those of an HF family. Layer i's tensors are layers + i + "." + the rest.
struct TensorNames {
  std::string embedding = "backbone.embedding.weight";
  std::string final_norm = "backbone.norm_f.weight";
  std::string layers = "backbone.layers.";
  std::string mixer_norm = "norm.weight";
  std::string mlp_norm = "norm2.weight";
  std::string ssm = "mixer.";        // the Mamba mixer's parameters
  std::string attention = "mixer.";  // the attention mixer's
  std::string mlp = "mlp.";
};

struct ModelConfig {
  Convention convention = Convention::kStateSpaces;
  // The HF family ("mamba", "falcon_mamba", "mamba2", ...) or "state-spaces".
  std::string family = "state-spaces";
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
  Mamba1Config mamba1;
  Mamba2Config mamba2;
  Mamba3Config mamba3;
  AttentionConfig attention;
  std::vector<int64_t> attn_layer_idx;
  TensorNames names;
  // One kind per layer when the config lists them (HF hybrids); empty: the
  // SSM kind everywhere but at attn_layer_idx.
  std::vector<MixerKind> layer_kinds;
  // Nemotron-H: MLPs are layers of their own (kMlp), not a second sub-block.
  bool mlp_as_layers = false;
  // Granite 4.0-H: the MLP sub-block is a mixture of experts (experts > 0
  // or a shared expert); d_intermediate is unused then.
  MoeConfig moe;
  bool moe_mlp = false;
  // HF's per-expert mixtures of experts: Nemotron-H's kMoe layers, and
  // Jamba's MLP sub-blocks at sparse_moe_layers (the others SwiGLU).
  SparseMoeConfig sparse_moe;
  std::vector<int64_t> sparse_moe_layers;
  // Granite's multipliers: embeddings times embedding_multiplier, every
  // sub-block's output times residual_multiplier before it joins the
  // residual stream, logits divided by logits_scaling.
  float embedding_multiplier = 1.f, residual_multiplier = 1.f, logits_scaling = 1.f;
  // HF MLPs: exactly this hidden width (no rounding) and gate/up/down_proj.
  bool hf_mlp = false;
  // Falcon-H1: attention beside the Mamba-2 mixer in every layer, on the same
  // normed input times attention_in_multiplier; the residual stream gains
  // ssm_out_multiplier * mamba + attention_out_multiplier * attention. Its
  // MLPs take SiLU(gate * mlp_gate_multiplier) and scale their output by
  // mlp_down_multiplier.
  bool parallel_attention = false;
  float attention_in_multiplier = 1.f, attention_out_multiplier = 1.f, ssm_out_multiplier = 1.f;
  float mlp_gate_multiplier = 1.f, mlp_down_multiplier = 1.f;
  // Zamba2: the layers that first run a shared attention block (use u of
  // shared_block_layers runs block u % shared_blocks with its own adapters,
  // linear and KV cache) and add its output to the Mamba-2 mixer's input:
  // h += mamba(RMSNorm(h + shared(h, embeddings))). Their own norm and
  // mixer are under "mamba_decoder.".
  std::vector<int64_t> shared_block_layers;
  int64_t shared_blocks = 0;
  SharedBlockConfig shared_block;
  Json source;  // the config.json as read, written back unchanged by convert

  int64_t padded_vocab() const {
    const int64_t m = pad_vocab_size_multiple;
    return (vocab_size + m - 1) / m * m;
  }
  MixerKind mixer_kind(int64_t layer) const;
  bool has_mlp() const { return moe_mlp || (d_intermediate > 0 && !mlp_as_layers); }
  // d_intermediate rounded up to a multiple of 128 (SPEC §5).
  int64_t mlp_hidden() const { return hf_mlp ? d_intermediate : (d_intermediate + 127) / 128 * 128; }
  std::string embedding_name() const;
  // Layer i's norm and mixer names start with this (HF's decoder layer).
  std::string layer_prefix(int64_t layer) const;
  // Where use u of a shared block is (-1: layer i runs none).
  int64_t shared_use(int64_t layer) const;
  // The prefix of layer i's mixer parameters, by its kind.
  std::string mixer_prefix(int64_t layer) const;
};

// Throws ssm::Error naming `source` and the key on missing, mistyped or
// inconsistent values.
ModelConfig parse_model_config(const Json& j, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& config_json);

}  // namespace ssm
