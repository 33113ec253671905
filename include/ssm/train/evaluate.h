// Held-out scoring: loss per token, perplexity and bits per byte.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "ssm/model/language_model.h"

namespace ssm {

struct EvalResult {
  double loss_sum = 0;  // nats over all predicted tokens
  int64_t tokens = 0;   // predicted tokens
  int64_t bytes = 0;    // bytes those tokens stand for
  double loss() const { return tokens ? loss_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const { return std::exp(loss()); }
  double bits_per_byte() const {
    return bytes ? loss_sum / std::log(2.0) / static_cast<double>(bytes) : 0.0;
  }
};

// Scores every batch of windows (next-token loss inside each window).
// bytes_of(id) is the byte length of a token (1 for raw-byte models).
EvalResult evaluate_batches(LanguageModel& model, const std::vector<Tensor>& batches,
                            const std::function<int64_t(int64_t)>& bytes_of, Context& ctx);

}  // namespace ssm
