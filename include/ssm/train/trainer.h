// The training loop: batches from a BatchSampler, gradient accumulation,
// global-norm clipping, AdamW on the trainable slices (WSLA-aware) under a
// warmup + cosine schedule, and checkpoints that resume bit-exactly.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssm/ops/context.h"
#include "ssm/io/json.h"
#include "ssm/model/language_model.h"
#include "ssm/train/data.h"
#include "ssm/train/grad_reducer.h"
#include "ssm/train/optimizer.h"
#include "ssm/train/step_graph.h"

namespace ssm {

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch = 8;
  int64_t seq_len = 256;
  int64_t accumulation = 1;  // micro-batches per optimizer step
  double lr = 1e-3;
  int64_t warmup = 100;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double clip = 1.0;  // <= 0: no clipping
  uint64_t seed = 0;
  bool wsla = false;
  // Residual dropout (ResidualDropout in language_model.h), 0 <= dropout < 1;
  // its masks come from seed and the step, so a resumed run draws the
  // unbroken run's. Part of a checkpoint's options when above 0.
  double dropout = 0;
  // Layers keep their internals for the backward unless this is set (then
  // recomputed from each block's input: less memory, the same results). Not part of a checkpoint's options: it does not change the run.
  bool recompute = false;
  // Data parallel: this process is rank `rank` of `world`; each takes its
  // own `batch` rows of every global batch of batch * world rows (the
  // sampler's draws are the same on every rank). world is part of a
  // checkpoint's options when above 1; rank is not.
  int64_t world = 1;
  int64_t rank = 0;

  // The options that shape the loss curve, for checkpoints.
  Json to_json() const;
  static TrainOptions from_json(const Json& j, const std::string& source);
};

struct StepReport {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  double loss = 0;   // mean training loss of the step's micro-batches (NaN: not read back)
  double lr = 0;
  double grad_norm = 0;  // before clipping (NaN: not read back)
  int64_t tokens = 0;    // tokens consumed by this step (by every rank together)
  double comm_wait_ms = -1;  // data parallel: see GradientTransport::last_wait_ms
};

class Trainer {
 public:
  // train_tokens must outlive the trainer. set_wsla is applied to model, and
  // its BF16/F16 weights are widened (exactly) to the F32 master weights the
  // optimiser needs; Q8 ones are refused.
  Trainer(LanguageModel& model, const std::vector<int32_t>& train_tokens, TrainOptions options,
          Context& ctx);
  ~Trainer();

  // One optimizer step. On a device backend the step's loss and gradient
  // norm stay in device memory, and the host queues the whole step without
  // waiting for the device, unless read_back (then it waits for the step to
  // end and reports them; without it they are NaN). The weights are the
  // same either way, to the bit. Host backends and data-parallel runs
  // always read them.
  StepReport step(bool read_back = true);
  int64_t steps_done() const { return optimizer_.steps(); }
  bool finished() const { return steps_done() >= options_.steps; }
  // The step graph (step_graph.h; SSM_CUDA_TRAIN_GRAPH=0 turns it off): whether steps may still be
  // recorded, and whether they are now replayed.
  bool step_graph_on() const { return graph_->on(); }
  bool step_graph_recorded() const { return graph_->recorded(); }
  const TrainOptions& options() const { return options_; }

  // Called with the summed gradients before clipping (after the reducer's
  // all-reduce). Unset: nothing.
  void set_gradient_hook(std::function<void(Gradients&)> hook) { hook_ = std::move(hook); }
  // Data parallel: the last micro-batch's backward hands its final
  // gradients to reducer (means over the ranks by the clip), and the
  // step's loss is the mean over group's ranks. Both outlive the trainer.
  void set_data_parallel(dist::Group* group, GradientReducer* reducer) {
    group_ = group;
    reducer_ = reducer;
  }
  // The gradients the reducer must be built on.
  Gradients& gradients() { return grads_; }

  // Writes dir/model.safetensors (weights) and dir/checkpoint.safetensors
  // (weights, AdamW moments, step, data position, options), each atomically.
  void save_checkpoint(const std::filesystem::path& dir);
  // Restores from a checkpoint.safetensors written by save_checkpoint;
  // ssm::Error for a truncated, malformed or mismatched file.
  void load_checkpoint(const std::filesystem::path& file);

 private:
  LanguageModel& model_;
  const std::vector<int32_t>& tokens_;
  TrainOptions options_;
  Context& ctx_;
  BatchSampler sampler_;
  Gradients grads_;
  AdamW optimizer_;
  LrSchedule schedule_;
  std::function<void(Gradients&)> hook_;
  dist::Group* group_ = nullptr;
  GradientReducer* reducer_ = nullptr;
  // On a device: each micro-batch's loss sum, then the squared gradient
  // norm (F64), until read back.
  Tensor device_sums_;
  std::unique_ptr<StepGraph> graph_;
};

// Reads the options stored in a checkpoint (for a resume that must reuse them).
TrainOptions read_checkpoint_options(const std::filesystem::path& file);

// Writes every parameter of model as F32 safetensors (atomically).
void save_model_weights(LanguageModel& model, const std::filesystem::path& file);

}  // namespace ssm
