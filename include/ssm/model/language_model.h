// A language model per SPEC §1: embedding, pre-norm residual blocks (mixer
// and optional MLP), final norm and (tied) head.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssm/core/context.h"
#include "ssm/io/checkpoint.h"
#include "ssm/layers/sequence_layer.h"
#include "ssm/model/config.h"
#include "ssm/model/memory_budget.h"

namespace ssm {

// Per-layer recurrent state of a batch of sequences.
struct ModelState {
  int64_t batch = 0;
  std::vector<std::unique_ptr<LayerState>> layers;  // null for stateless layers
  std::vector<std::unique_ptr<LayerState>> mlps;    // unused today, kept parallel
  int64_t position = 0;  // tokens consumed so far
};

// Optional capture of intermediate activations (goldens and debugging).
struct ForwardTrace {
  std::vector<Tensor> mixer_in;   // RMSNorm_i(h), per layer, (B, L, D)
  std::vector<Tensor> mixer_out;  // raw mixer output, per layer
  std::vector<Tensor> hidden;     // residual after layer i; last: norm_f output
};

class LanguageModel {
 public:
  // Builds the layers for config; parameters are allocated but undefined
  // until load() or an initialiser fills them.
  explicit LanguageModel(ModelConfig config);
  ~LanguageModel();
  LanguageModel(LanguageModel&&) noexcept;

  // config.json + weights from a model directory. What the model needs is
  // checked against options.max_memory (memory_budget.h) before any layer is
  // built or weight read.
  static LanguageModel load(const std::filesystem::path& model_dir, const LoadOptions& options = {});
  // Fills every parameter from source, checking names and shapes.
  void load_weights(const TensorSource& source);

  const ModelConfig& config() const { return config_; }
  int64_t n_layer() const { return config_.n_layer; }
  SequenceLayer& mixer(int64_t layer) { return *mixers_.at(layer); }
  // The MLP sub-block of layer i, null without d_intermediate (training).
  SequenceLayer* mlp(int64_t layer);

  // Visits every parameter with its full checkpoint name: the one table used
  // by loading, saving, initialisation and optimisers.
  void for_each_param(const std::function<void(const std::string&, Param&)>& fn);
  int64_t parameter_count();

  ModelState make_state(int64_t batch) const;

  // ids: (B, L) I64 or I32. Returns logits (B, L, vocab_size), or only the
  // last position's (B, 1, vocab_size) when last_only. With a state, the
  // sequences continue from it and it is advanced.
  Tensor forward(const Tensor& ids, ModelState* state, Context& ctx, bool last_only = false,
                 ForwardTrace* trace = nullptr);

  // Decoding: one token per sequence (tokens: B ids, any vocabulary id) is
  // consumed and the state advanced; returns the next-token logits
  // (B, vocab_size), a buffer the model holds and overwrites on the next call
  // (callers may change it in place, as samplers do). Nothing is allocated
  // once the buffers have grown to the batch.
  Tensor& step(const int64_t* tokens, ModelState& state, Context& ctx);

  void set_wsla(bool on);
  std::vector<TrainableSlice> trainable_parameters();

 private:
  struct StepBuffers;
  std::unique_ptr<StepBuffers> step_buffers_;
  struct Block;
  ModelConfig config_;
  Param embedding_;
  Param norm_f_;
  Param lm_head_;  // used only when embeddings are untied
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<SequenceLayer*> mixers_;
};

// Copies sequence src_row of src into sequence dst_row of dst (both made by
// the same model; every state tensor is indexed by sequence first, KV caches
// are copied up to the sequence's length and grown to hold it).
void copy_state_row(ModelState& dst, int64_t dst_row, ModelState& src, int64_t src_row);

// Grows every KV cache of state to hold max_len tokens per sequence, so that
// decoding up to that length allocates nothing. A no-op for pure SSMs.
void reserve_state(ModelState& state, int64_t max_len);

// The mixer for layer i of config (Mamba-2, Mamba-3 or attention).
std::unique_ptr<SequenceLayer> make_mixer(const ModelConfig& config, int64_t layer);

}  // namespace ssm
