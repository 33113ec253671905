#include "ssm/train/data.h"

#include <algorithm>
#include <sstream>

#include "ssm/core/error.h"

namespace ssm {

TokenSplit split_tokens(std::vector<int32_t> tokens, double holdout_fraction, int64_t length,
                        const std::string& what) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  int64_t held = static_cast<int64_t>(static_cast<double>(n) * holdout_fraction);
  held = std::max<int64_t>(held, holdout_fraction > 0 ? length + 1 : 0);
  if (n - held < length + 1)
    throw Error(cat(what, ": ", n, " tokens are too few for windows of ", length,
                    " tokens plus a held-out part of ", held));
  TokenSplit s;
  s.held_out.assign(tokens.end() - held, tokens.end());
  tokens.resize(n - held);
  s.train = std::move(tokens);
  return s;
}

uint64_t token_fingerprint(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  return h;
}

BatchSampler::BatchSampler(const std::vector<int32_t>& tokens, int64_t batch, int64_t length,
                           uint64_t seed, int64_t rank, int64_t world)
    : tokens_(&tokens), batch_(batch), length_(length), rank_(rank), world_(world), rng_(seed) {
  SSM_CHECK(static_cast<int64_t>(tokens.size()) >= length, "fewer tokens than one window");
  SSM_CHECK(world >= 1 && rank >= 0 && rank < world, "rank ", rank, " of ", world);
}

Tensor BatchSampler::next() {
  Tensor ids = Tensor::empty(DType::kI64, {batch_, length_});
  const uint64_t starts = tokens_->size() - static_cast<uint64_t>(length_) + 1;
  for (int64_t g = 0; g < batch_ * world_; ++g) {
    // Modulo bias is negligible against 2^64.
    const uint64_t start = rng_() % starts;
    if (g / batch_ != rank_) continue;  // another rank's row
    const int64_t b = g % batch_;
    for (int64_t t = 0; t < length_; ++t) ids.data<int64_t>()[b * length_ + t] = (*tokens_)[start + t];
  }
  return ids;
}

std::string BatchSampler::state() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

void BatchSampler::restore(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 rng;
  in >> rng;
  if (in.fail()) throw Error("malformed data-sampler state");
  rng_ = rng;
}

std::vector<Tensor> fixed_windows(const std::vector<int32_t>& tokens, int64_t batch, int64_t length,
                                  int64_t max_tokens) {
  if (length < 1) throw Error(cat("windows of ", length, " tokens: the length must be at least 1"));
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_tokens);
  const int64_t windows = n / length;
  std::vector<Tensor> out;
  for (int64_t w0 = 0; w0 < windows; w0 += batch) {
    const int64_t rows = std::min(batch, windows - w0);
    Tensor ids = Tensor::empty(DType::kI64, {rows, length});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < length; ++t)
        ids.data<int64_t>()[r * length + t] = tokens[(w0 + r) * length + t];
    out.push_back(ids);
  }
  return out;
}

}  // namespace ssm
