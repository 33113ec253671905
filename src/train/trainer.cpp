#include "ssm/train/trainer.h"

#include <cmath>
#include <limits>

namespace ssm {
namespace {

// The model as training takes it: 16-bit projections (a BF16 or F16
// checkpoint loaded as stored) widened to the F32 master weights the
// optimiser updates, before the gradients and moments are shaped after them.
// Every 16-bit value is exactly an F32, so nothing is lost; Q8 values are a
// rounding of the weights, not the weights, and are refused.
LanguageModel& for_training(LanguageModel& model, bool wsla) {
  model.for_each_param([](const std::string& name, Param& p) {
    if (!p.value.defined() || p.value.dtype() == DType::kF32) return;
    if (p.value.dtype() != DType::kBF16 && p.value.dtype() != DType::kF16)
      throw Error(cat("training needs F32 master weights: ", name, " is ", dtype_name(p.value.dtype()),
                      ", which cannot be widened to them exactly; load the checkpoint in F32"));
    p.value = p.value.to_dtype(DType::kF32);
  });
  model.set_wsla(wsla);
  return model;
}

}  // namespace

Json TrainOptions::to_json() const {
  Json j{{"steps", steps},         {"batch", batch},
         {"seq_len", seq_len},     {"accumulation", accumulation},
         {"lr", lr},               {"warmup", warmup},
         {"min_lr_ratio", min_lr_ratio}, {"weight_decay", weight_decay},
         {"clip", clip},           {"seed", seed},
         {"wsla", wsla}};
  // Only a data-parallel run says so: one-process checkpoints stay as they were.
  if (world > 1) j["world"] = world;
  if (dropout > 0) j["dropout"] = dropout;  // likewise, runs without dropout
  return j;
}

TrainOptions TrainOptions::from_json(const Json& j, const std::string& source) {
  TrainOptions o;
  // nlohmann casts a float to an integer unchecked (undefined out of range).
  for (const char* key : {"steps", "batch", "seq_len", "accumulation", "warmup", "seed", "world"})
    if (j.is_object() && j.contains(key) && !j[key].is_number_integer())
      throw Error(cat(source, ": malformed training options: '", key, "' must be an integer"));
  try {
    o.steps = j.at("steps").get<int64_t>();
    o.batch = j.at("batch").get<int64_t>();
    o.seq_len = j.at("seq_len").get<int64_t>();
    o.accumulation = j.at("accumulation").get<int64_t>();
    o.lr = j.at("lr").get<double>();
    o.warmup = j.at("warmup").get<int64_t>();
    o.min_lr_ratio = j.at("min_lr_ratio").get<double>();
    o.weight_decay = j.at("weight_decay").get<double>();
    o.clip = j.at("clip").get<double>();
    o.seed = j.at("seed").get<uint64_t>();
    o.wsla = j.at("wsla").get<bool>();
    if (j.contains("world")) o.world = j.at("world").get<int64_t>();
    if (j.contains("dropout")) o.dropout = j.at("dropout").get<double>();
  } catch (const Json::exception& e) {
    throw Error(cat(source, ": malformed training options: ", e.what()));
  }
  return o;
}

Trainer::Trainer(LanguageModel& model, const std::vector<int32_t>& train_tokens,
                 TrainOptions options, Context& ctx)
    : model_(for_training(model, options.wsla)),
      tokens_(train_tokens),
      options_(options),
      ctx_(ctx),
      sampler_(train_tokens, options.batch, options.seq_len, options.seed, options.rank, options.world),
      grads_(model),
      optimizer_(model.trainable_parameters(),
                 AdamWOptions{.weight_decay = options.weight_decay}),
      schedule_{.peak = options.lr, .warmup = options.warmup, .total = options.steps,
                .min_ratio = options.min_lr_ratio} {
  if (options.batch < 1 || options.seq_len < 2 || options.accumulation < 1 || options.steps < 0)
    throw Error(cat("training needs batch >= 1, seq_len >= 2, accumulation >= 1 (got ",
                    options.batch, ", ", options.seq_len, ", ", options.accumulation, ")"));
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw Error(cat("dropout must be at least 0 and below 1, got ", options.dropout));
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world)
    throw Error(cat("rank ", options.rank, " of ", options.world, " is not a rank of the run"));
  // A recorded step reads only the ids, rate and step count from the host:
  // not the micro-batches' several ids, nor dropout's seeds.
  graph_ = std::make_unique<StepGraph>(
      ctx, options.accumulation == 1 && options.dropout == 0 && options.world == 1 && !options.wsla);
  // Only the optimiser (and load_checkpoint) write the weights from here on:
  // a bf16-compute backend may keep their bf16 copies between those writes.
  if (BackendResources* r = ctx_.resources())
    model_.for_each_param([&](const std::string&, Param& p) {
      if (p.value.defined() && p.value.device() == ctx_.device() && p.value.dtype() == DType::kF32)
        r->keep_weight_copies(p.value.raw(), p.value.nbytes());
    });
}

Trainer::~Trainer() {
  graph_.reset();  // before the weights it reads
  if (BackendResources* r = ctx_.resources()) r->forget_weights();
}

StepReport Trainer::step(bool read_back) {
  StepReport r;
  // A data-parallel run sums the loss over the ranks on the host at every step.
  const bool on_device = !ctx_.device().is_host() && !group_;
  const int64_t micro = options_.accumulation;
  if (on_device && !device_sums_.defined())
    device_sums_ = Tensor::zeros(DType::kF64, {micro + 1}, ctx_.device());
  std::vector<Tensor> batches;
  for (int64_t k = 0; k < micro; ++k) batches.push_back(sampler_.next());
  const int64_t steps_before = optimizer_.steps();
  r.lr = schedule_.at(steps_before);
  std::vector<LossSum> losses;
  bool clip_on_device = false;
  const double scale = 1.0 / static_cast<double>(options_.accumulation);
  const auto mean_loss = [&] {
    for (const LossSum& l : losses) r.loss += l.mean() * scale;
  };
  // The step's device work: gradients, their norm, the update. False where
  // the norm came back to the host (a recording cannot replay that).
  const auto work = [&] {
    losses.clear();
    grads_.zero(ctx_);
    const GradientsFinal on_final = [this](const std::vector<const Param*>& params) {
      reducer_->mark_final(params);
    };
    for (int64_t k = 0; k < micro; ++k) {
      // Keeping each block's internals saves the backward a second forward
      // (on the host about a fifth of a step) for their memory.
      const bool keep = !options_.recompute;
      // Only the last micro-batch's backward finishes gradients.
      const bool last = k + 1 == micro;
      if (reducer_ && last) reducer_->begin();
      // Every forward pass of the run (step, micro-batch, rank) its own masks,
      // numbered from what a checkpoint restores: a resumed run draws the same.
      const auto draw = (static_cast<uint64_t>(optimizer_.steps()) * static_cast<uint64_t>(micro) +
                         static_cast<uint64_t>(k)) * static_cast<uint64_t>(options_.world) +
                        static_cast<uint64_t>(options_.rank);
      const ResidualDropout dropout{.p = options_.dropout, .seed = options_.seed, .step = draw};
      losses.push_back(model_loss_and_grad(model_, batches[static_cast<size_t>(k)], &grads_, scale, ctx_,
                                           nullptr, keep, reducer_ && last ? &on_final : nullptr, dropout,
                                           on_device ? device_sums_.slice(0, k, k + 1) : Tensor()));
    }
    if (reducer_) reducer_->finish();
    if (!on_device) mean_loss();
    if (group_) {  // every rank's rows count alike: the mean of the ranks' means
      group_->all_reduce_sum(&r.loss, 1);
      r.loss /= static_cast<double>(group_->size());
    }
    if (hook_) hook_(grads_);
    // On a device the norm stays there, and the clip is applied by the update.
    const Tensor sum_squares = on_device ? device_sums_.slice(0, micro, micro + 1) : Tensor();
    clip_on_device = on_device && grad_sum_squares_on_device(optimizer_.slices(), grads_, sum_squares, ctx_);
    if (!clip_on_device) r.grad_norm = clip_grad_norm(optimizer_.slices(), grads_, options_.clip, ctx_);
    optimizer_.step(grads_, r.lr, ctx_, clip_on_device ? sum_squares : Tensor(), options_.clip);
    return clip_on_device;
  };
  // Recorded (step_graph.h) only where nothing of the step is the host's:
  // no ranks, no hook (the options rule out the rest when graph_ is made).
  const bool replayed =
      on_device && !reducer_ && !hook_ &&
      graph_->run({.ids = batches.front(), .lr = r.lr, .step = steps_before + 1}, work, [&] {
        optimizer_.set_steps(steps_before);
        if (BackendResources* res = ctx_.resources()) res->weights_changed();
      });
  if (replayed) {
    losses.assign(1, LossSum{.count = batches.front().dim(0) * (batches.front().dim(1) - 1)});
    clip_on_device = true;
    optimizer_.set_steps(steps_before + 1);
  } else {
    work();
  }
  for (const Tensor& ids : batches) r.tokens += ids.numel() * options_.world;
  if (BackendResources* res = ctx_.resources()) res->weights_changed();
  r.step = optimizer_.steps();
  if (on_device && read_back) {
    // The host's arithmetic of before on the device's sums: the same report.
    const Tensor sums = device_sums_.to(Device::host());
    for (int64_t k = 0; k < micro; ++k) losses[k].sum = sums.data<double>()[k];
    mean_loss();
    if (clip_on_device) r.grad_norm = std::sqrt(sums.data<double>()[micro]);
  } else if (on_device) {
    r.loss = std::numeric_limits<double>::quiet_NaN();
    if (clip_on_device) r.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  // Known once the step's work is done: after the optimizer's host read.
  if (reducer_) r.comm_wait_ms = reducer_->transport().last_wait_ms();
  return r;
}

}  // namespace ssm
