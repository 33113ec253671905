#include "ssm/train/evaluate.h"

#include "ssm/train/model_grad.h"

namespace ssm {

EvalResult evaluate_batches(LanguageModel& model, const std::vector<Tensor>& batches,
                            const std::function<int64_t(int64_t)>& bytes_of, Context& ctx) {
  EvalResult r;
  for (const Tensor& ids : batches) {
    const LossSum loss = model_loss(model, ids, ctx);
    r.loss_sum += loss.sum;
    r.tokens += loss.count;
    const std::vector<int64_t> targets = next_token_targets(ids, model.config().vocab_size);
    for (int64_t t : targets)
      if (t >= 0) r.bytes += bytes_of(t);
  }
  return r;
}

}  // namespace ssm
