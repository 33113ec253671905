// adapt(): WSLA fast-adapt of the loaded model on a text, `ssm train
// --wsla` in place, with the held-out loss before and after.
#include "model_module.h"
#include "ssm/model/state_file.h"
#include "ssm/train/data.h"
#include "ssm/train/trainer.h"

namespace ssm::web {

// The last `holdout` fraction of the text is held out and scored before and
// after; on_step(json) gets each step's report.
val Model::adapt(const std::string& request, val on_step) {
  return guarded([&] {
    check_loaded();
    const Json r = parse_json(request, "adapt request");
    TrainOptions opt;
    opt.wsla = field<bool>(r, "wsla", true);
    opt.steps = field<int64_t>(r, "steps", 20);
    opt.lr = field<double>(r, "lr", 1e-3);
    opt.batch = field<int64_t>(r, "batch", 4);
    opt.seq_len = field<int64_t>(r, "seqLen", 64);
    opt.warmup = field<int64_t>(r, "warmup", 0);
    opt.weight_decay = field<double>(r, "weightDecay", 0.0);
    opt.seed = field<uint64_t>(r, "seed", 0);
    if (opt.steps < 1) throw Error("adapt: steps must be at least 1");
    if (!(opt.lr > 0 && opt.lr <= 10)) throw Error("adapt: lr must be in (0, 10]");
    if (opt.seq_len < 2 || opt.batch < 1)
      throw Error("adapt: seqLen must be at least 2 and batch at least 1");
    const double holdout = field<double>(r, "holdout", 0.1);
    std::vector<int32_t> ids = tokenizer().encode(field<std::string>(r, "text", ""));
    const TokenSplit split = split_tokens(std::move(ids), holdout, opt.seq_len, "adapt: the text");
    const Json before = eval_json(split.held_out, opt.seq_len);
    Json steps = Json::array();
    {
      Trainer trainer(*model_, split.train, opt, *ctx_);
      while (!trainer.finished()) {
        const StepReport rep = trainer.step();
        const Json j = {
            {"step", rep.step}, {"loss", rep.loss}, {"lr", rep.lr}, {"gradNorm", rep.grad_norm}};
        steps.push_back(j);
        if (!on_step.isUndefined()) on_step(j.dump());
      }
    }
    // The weights changed: states of the old weights no longer continue it.
    fingerprint_ = model_fingerprint(*model_, *ctx_);
    return json_value({{"steps", steps},
                       {"heldOutBefore", before},
                       {"heldOutAfter", eval_json(split.held_out, opt.seq_len)}});
  });
}

}  // namespace ssm::web
