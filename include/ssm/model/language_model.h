// A language model per SPEC §1: embedding, pre-norm residual blocks (mixer
// and optional MLP), final norm and (tied) head. One block loop
// (run_blocks) serves prefill, decoding and training.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssm/io/checkpoint.h"
#include "ssm/layers/sequence_layer.h"
#include "ssm/layers/shared_attention_block.h"
#include "ssm/model/config.h"
#include "ssm/model/memory_budget.h"
#include "ssm/ops/context.h"

namespace ssm {

// Per-layer recurrent state of a batch of sequences.
struct ModelState {
  int64_t batch = 0;
  // In block order, each block's mixer state, then that of its parallel
  // attention (Falcon-H1) or shared block use (Zamba2, its KV cache) where
  // it has one; null for stateless layers.
  std::vector<std::unique_ptr<LayerState>> layers;
  int64_t position = 0;  // tokens consumed so far
};

// Optional capture of intermediate activations (goldens and debugging).
struct ForwardTrace {
  std::vector<Tensor> mixer_in;   // RMSNorm_i(h), per layer, (B, L, D)
  std::vector<Tensor> mixer_out;  // raw mixer output, per layer
  std::vector<Tensor> hidden;     // residual after layer i; last: norm_f output
};

// Training's residual dropout (ops/dropout.h), p = 0: none. The forward
// with a tape drops elements of the embedding's output and of each mixer's
// and MLP's output before it joins the residual stream; inference never
// does. The masks are those of (seed, step, site): `step` numbers the run's
// forward passes, so that the backward, a resumed run and another backend
// draw the same ones.
struct ResidualDropout {
  double p = 0;
  uint64_t seed = 0, step = 0;
  bool on() const { return p > 0; }
  static constexpr uint64_t kEmbeddingSite = 0;
  // Block i's mixer: 1 + 2i, its MLP 2 + 2i.
  static uint64_t layer_site(int64_t block, bool mlp) { return 1 + 2 * static_cast<uint64_t>(block) + (mlp ? 1 : 0); }
};

// What the block loop keeps for training's backward. Sub-blocks are
// numbered mixer_0, (mlp_0), mixer_1, ...: for each, the residual stream
// entering it and, unless the backward is to recompute them, the
// activations its layer kept.
// Falcon-H1's parallel layers and Zamba2's blocks with a shared block use
// are one sub-block each whose backward always recomputes (null
// activations); Zamba2's shared blocks also read the embeddings, kept in
// `embedded`.
struct BlockTape {
  bool keep_activations = false;
  ResidualDropout dropout;
  std::vector<Tensor> inputs;
  std::vector<std::unique_ptr<LayerActivations>> activations;
  Tensor embedded;
};

class LanguageModel {
 public:
  // One residual block: h += mixer(norm(h)); then, with an MLP, h += mlp(norm2(h)).
  struct Block {
    Param norm;
    std::unique_ptr<SequenceLayer> mixer;
    // Falcon-H1: attention on the same normed input, its output summed with
    // the mixer's (parallel_attention in the config).
    std::unique_ptr<SequenceLayer> parallel;
    // Zamba2: a use of a shared block, run before the mixer (see ModelConfig).
    std::unique_ptr<SequenceLayer> shared;
    Param norm2;
    std::unique_ptr<SequenceLayer> mlp;  // null without d_intermediate
  };

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
  // Converts the projection matrices (every 2-D weight: in/out projections,
  // MLP and attention projections, the embedding and head) to dtype (F16,
  // BF16 or Q8 with per-row scales) for inference; norms, convolutions, A,
  // D, biases stay F32. F32 is a no-op. Such a model computes forward and
  // step; its backward needs F32 weights.
  void convert_projections(DType dtype);
  // The dtype the projection matrices are in now (F32 before any is filled).
  DType projection_dtype();

  // What `--dtype auto` picks for this model's projections from source: the
  // dtype they are stored in when they all share one of F32, BF16 and F16;
  // F32 when they are stored in several dtypes or in another one (F64): no
  // projection then loses precision to another's dtype (BF16 and F16 cannot
  // hold each other's values). `stored` lists the distinct dtypes of the
  // projections as stored, in DType order. Reads headers only.
  struct AutoWeights {
    DType dtype = DType::kF32;
    std::vector<DType> stored;
  };
  AutoWeights auto_weights(const TensorSource& source);

  const ModelConfig& config() const { return config_; }
  int64_t n_layer() const { return config_.n_layer; }
  SequenceLayer& mixer(int64_t layer) { return *blocks_.at(layer)->mixer; }
  // The MLP sub-block of layer i, null without d_intermediate.
  SequenceLayer* mlp(int64_t layer);
  Block& block(int64_t layer) { return *blocks_.at(layer); }
  Param& embedding() { return embedding_; }
  Param& norm_f() { return norm_f_; }
  // The output head: the embedding when tied, else lm_head.
  Param& head() { return config_.tie_embeddings ? embedding_ : lm_head_; }

  // Visits every parameter with its full checkpoint name: the one table used
  // by loading, saving, initialisation and optimisers.
  void for_each_param(const std::function<void(const std::string&, Param&)>& fn);
  int64_t parameter_count();
  // Moves every parameter to a device, once (the cuda backend computes with
  // weights in GPU memory; states made afterwards live there too).
  void to_device(Device device);

  ModelState make_state(int64_t batch) const;
  // The dtype of the Mamba-2 and Mamba-3 SSM states that make_state gives
  // from now on: F32 (the default, exact) or BF16 (half the state's memory
  // and traffic: each op widens it exactly, computes in F32 and rounds the
  // new state to nearest even as it stores it, as the reference's inference
  // cache in a BF16 model's dtype does). Conv rows, Mamba-3's k/v of the
  // last step and its angles, KV caches and Mamba-1's state stay F32.
  // ssm::Error for another dtype. A GPU backend refuses BF16 states.
  void set_state_dtype(DType dtype);
  DType state_dtype() const { return state_dtype_; }

  // ids: (B, L) I64 or I32. Returns logits (B, L, vocab_size), or only the
  // last position's (B, 1, vocab_size) when last_only. With a state, the
  // sequences continue from it and it is advanced.
  Tensor forward(const Tensor& ids, ModelState* state, Context& ctx, bool last_only = false,
                 ForwardTrace* trace = nullptr);

  // Decoding: one token per sequence (tokens: B ids, any vocabulary id) is
  // consumed and the state advanced; returns the next-token logits
  // (B, vocab_size), a buffer the model holds and overwrites on the next call
  // (callers may change it in place, as samplers do). Its rows are
  // row_stride() apart, the vocabulary rounded up to a multiple of 8 (not
  // dense: cuBLAS's aligned kernels for the head at batch > 8). Nothing is
  // allocated once the buffers have grown to the batch.
  Tensor& step(const int64_t* tokens, ModelState& state, Context& ctx);

  // The pieces forward and step are made of, for training:
  // h (B, L, D) = Embedding[ids], ids already checked (check_ids).
  void embed(const Tensor& ids, const Tensor& h, Context& ctx);
  // ssm::Error naming the position of an id outside the vocabulary.
  void check_ids(const Tensor& ids) const;
  // The block loop over h (B, L, D) in place: the embedded tokens on entry,
  // the residual stream after the last block on return. With a state the
  // sequences continue from it; with a tape (no state) training's backward
  // gets what it needs.
  void run_blocks(const Tensor& h, ModelState* state, Context& ctx, BlockTape* tape = nullptr,
                  ForwardTrace* trace = nullptr);

  void set_wsla(bool on);
  std::vector<TrainableSlice> trainable_parameters();

 private:
  // The decode step's ops: embedding of ids (B) to the logits buffer.
  void step_body(const Tensor& ids, ModelState& state, Context& ctx);
  // The decode step's blocks as one ops::mamba2_decode_stack, where the
  // backend has that op and every block is a plain Mamba-2 layer; false
  // (nothing done) otherwise.
  bool step_blocks_as_stack(const Tensor& h, ModelState& state, Context& ctx);
  // Before a recorded (or replayed) decode step: room for the token in every
  // KV cache and the caches' lengths copied to step_positions_ on the device
  // (one queued copy), each cache reading its row there; false (nothing
  // done) where the step cannot be recorded.
  bool stage_step_positions(ModelState& state, Context& ctx, BackendResources& rec);
  ModelConfig config_;
  std::vector<std::unique_ptr<SharedAttentionBlock>> shared_blocks_;  // Zamba2
  Param embedding_;
  Param norm_f_;
  Param lm_head_;  // used only when embeddings are untied
  std::vector<std::unique_ptr<Block>> blocks_;
  DType state_dtype_ = DType::kF32;
  Tensor step_logits_;  // (B, V) of the last step
  Tensor step_ids_;     // (B) the step's ids, on a device backend's device
  // (caches, B) I64 on the device: the attention caches' lengths a recorded
  // step reads; step_positions_host_ stages them.
  Tensor step_positions_;
  std::vector<int64_t> step_positions_host_;
};

// Copies sequence src_row of src into sequence dst_row of dst (both made by
// the same model; every state tensor is indexed by sequence first, KV caches
// are copied up to the sequence's length and grown to hold it).
void copy_state_row(ModelState& dst, int64_t dst_row, ModelState& src, int64_t src_row,
                    Context& ctx);

// Grows every KV cache of state to hold max_len tokens per sequence, so that
// decoding up to that length allocates nothing. A no-op for pure SSMs.
void reserve_state(ModelState& state, int64_t max_len, Context& ctx);

// The mixer for layer i of config (Mamba-2, Mamba-3 or attention).
std::unique_ptr<SequenceLayer> make_mixer(const ModelConfig& config, int64_t layer);
// The MLP sub-block of layer i, or null where the config has none.
std::unique_ptr<SequenceLayer> make_mlp(const ModelConfig& config, int64_t layer);

}  // namespace ssm
