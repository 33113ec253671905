#include "ssm/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ssm/core/error.h"

namespace ssm {
namespace {

// Larger logit first, then smaller id: a strict total order, so partial
// sorts give one answer whatever the standard library.
struct ByLogit {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// First index of the largest logit; ssm::Error on NaN (a broken model).
int64_t argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i])) throw Error(cat("logit of token ", i, " is NaN"));
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

}  // namespace

void SamplingParams::validate() const {
  if (!(top_k >= 0)) throw Error(cat("top-k must be >= 0, got ", top_k));
  if (!(top_p > 0.f && top_p <= 1.f)) throw Error(cat("top-p must be in (0, 1], got ", top_p));
  if (!(min_p >= 0.f && min_p <= 1.f)) throw Error(cat("min-p must be in [0, 1], got ", min_p));
  if (!(repeat_penalty > 0.f)) throw Error(cat("repeat penalty must be > 0, got ", repeat_penalty));
  if (!(repeat_last_n >= 0)) throw Error(cat("repeat-last-n must be >= 0, got ", repeat_last_n));
  if (std::isnan(temperature) || std::isinf(temperature))
    throw Error(cat("temperature must be finite, got ", temperature));
}

void apply_repetition_penalty(float* logits, int64_t vocab, std::span<const int64_t> recent,
                              float penalty, std::span<uint8_t> seen) {
  SSM_CHECK(static_cast<int64_t>(seen.size()) >= vocab, "seen holds ", seen.size(), " flags");
  for (int64_t id : recent) {
    if (id < 0 || id >= vocab || seen[id]) continue;
    seen[id] = 1;
    float& l = logits[id];
    l = l > 0.f ? l / penalty : l * penalty;
  }
  for (int64_t id : recent)
    if (id >= 0 && id < vocab) seen[id] = 0;
}

Sampler::Sampler(int64_t vocab, SamplingParams params, uint64_t seed)
    : vocab_(vocab), params_(params), rng_(seed) {
  params_.validate();
  if (vocab <= 0) throw Error(cat("cannot sample from a vocabulary of ", vocab, " tokens"));
  order_.resize(static_cast<size_t>(vocab));
  kept_.reserve(static_cast<size_t>(vocab));
  seen_.assign(static_cast<size_t>(vocab), 0);
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

size_t Sampler::draw(std::span<const Candidate> candidates) {
  SSM_CHECK(!candidates.empty(), "nothing to draw from");
  double total = 0;
  for (const Candidate& c : candidates) total += c.prob;
  const double target = uniform() * total;
  double cum = 0;
  size_t last = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].prob <= 0) continue;
    cum += candidates[i].prob;
    last = i;
    if (target < cum) return i;
  }
  return last;  // rounding left target at the very top
}

void Sampler::sort_prefix(const float* logits, int64_t m) {
  if (m <= sorted_) return;
  const ByLogit cmp{logits};
  if (m < vocab_) std::nth_element(order_.begin(), order_.begin() + m, order_.end(), cmp);
  std::sort(order_.begin(), order_.begin() + m, cmp);
  sorted_ = m;
}

std::span<const Candidate> Sampler::distribution(float* logits, std::span<const int64_t> recent) {
  const SamplingParams& p = params_;
  if (p.repeat_penalty != 1.f && p.repeat_last_n > 0) {
    const size_t n = std::min(recent.size(), static_cast<size_t>(p.repeat_last_n));
    apply_repetition_penalty(logits, vocab_, recent.subspan(recent.size() - n), p.repeat_penalty,
                             seen_);
  }
  kept_.clear();
  const int64_t best = argmax(logits, vocab_);
  if (p.greedy()) {
    kept_.push_back({static_cast<int32_t>(best), 1.0});
    return kept_;
  }
  for (int64_t i = 0; i < vocab_; ++i) logits[i] /= p.temperature;
  const double lmax = logits[best];
  // min-p compares probabilities to the largest: p_i / p_max = exp(l_i - l_max).
  const double min_d = p.min_p > 0.f ? std::log(static_cast<double>(p.min_p)) : -INFINITY;
  auto weight = [&](int32_t id) { return std::exp(static_cast<double>(logits[id]) - lmax); };

  const int64_t k = p.top_k > 0 ? std::min(p.top_k, vocab_) : vocab_;
  if (k == vocab_ && p.top_p >= 1.f) {
    // No ordering needed: walk the vocabulary by id.
    for (int64_t i = 0; i < vocab_; ++i)
      if (static_cast<double>(logits[i]) - lmax >= min_d)
        kept_.push_back({static_cast<int32_t>(i), weight(static_cast<int32_t>(i))});
  } else {
    std::iota(order_.begin(), order_.end(), 0);
    sorted_ = 0;
    int64_t n = k;
    if (p.top_p < 1.f) {
      // Mass of the top-k set, the normaliser of top-p.
      double z = 0;
      if (k == vocab_) {
        for (int64_t i = 0; i < vocab_; ++i) z += weight(static_cast<int32_t>(i));
      } else {
        sort_prefix(logits, k);
        for (int64_t i = 0; i < k; ++i) z += weight(order_[i]);
      }
      // Sort a growing prefix until it holds the top-p cut.
      const double need = static_cast<double>(p.top_p) * z;
      for (int64_t m = std::min<int64_t>(k, 256);; m = std::min(k, 2 * m)) {
        sort_prefix(logits, m);
        double before = 0;
        int64_t cut = -1;
        for (int64_t i = 0; i < m; ++i) {
          if (before >= need) {
            cut = i;
            break;
          }
          before += weight(order_[i]);
        }
        if (cut >= 0 || m == k) {
          n = cut >= 0 ? cut : k;
          break;
        }
      }
    } else {
      sort_prefix(logits, k);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = order_[i];
      if (static_cast<double>(logits[id]) - lmax < min_d) break;  // sorted: the rest fail too
      kept_.push_back({id, weight(id)});
    }
  }
  double total = 0;
  for (const Candidate& c : kept_) total += c.prob;
  for (Candidate& c : kept_) c.prob /= total;
  return kept_;
}

int64_t Sampler::sample(float* logits, std::span<const int64_t> recent) {
  const std::span<const Candidate> d = distribution(logits, recent);
  // A draw per sampled token, even from one survivor, keeps the generator's
  // stream aligned with the token count.
  if (params_.greedy()) return d[0].id;
  return d[draw(d)].id;
}

}  // namespace ssm
