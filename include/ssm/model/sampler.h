// Next-token sampling from a row of logits. The pipeline, in order:
//   repetition penalty  (each distinct token among the last repeat_last_n:
//                        logit / penalty if positive, logit * penalty if not)
//   temperature         (logits / T; T <= 0 means greedy: the argmax)
//   top-k               (the k largest logits)
//   top-p               (the smallest prefix, largest first, whose probability,
//                        renormalised over what top-k kept, reaches p)
//   min-p               (probability at least min_p times the largest)
// then one categorical draw from what is left, renormalised. Ties between
// equal logits go to the smaller id, so the result is fully determined.
// The random draws are our own on std::mt19937_64 (whose output the standard
// fixes), never std distributions, so a seed gives the same tokens everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ssm {

struct SamplingParams {
  float temperature = 0.f;     // <= 0: greedy
  int64_t top_k = 0;           // 0: off
  float top_p = 1.f;           // 1: off
  float min_p = 0.f;           // 0: off
  float repeat_penalty = 1.f;  // 1: off
  int64_t repeat_last_n = 64;  // how much history the penalty looks at

  bool greedy() const { return temperature <= 0.f || top_k == 1; }
  // ssm::Error naming the parameter when a value is out of range.
  void validate() const;
};

// One token the draw can pick and its probability.
struct Candidate {
  int32_t id;
  double prob;
};

// The penalty on its own (HF's convention), each distinct id once; ids
// outside [0, vocab) are ignored. seen: vocab zero bytes, returned zeroed.
void apply_repetition_penalty(float* logits, int64_t vocab, std::span<const int64_t> recent,
                              float penalty, std::span<uint8_t> seen);

class Sampler {
 public:
  // vocab: the logit columns (the real vocabulary, never padded rows).
  Sampler(int64_t vocab, SamplingParams params, uint64_t seed);

  // Applies the pipeline to logits (changed in place by the penalty and the
  // temperature) and returns the distribution the draw uses, probabilities
  // summing to 1, valid until the next call. recent: the tokens so far.
  std::span<const Candidate> distribution(float* logits, std::span<const int64_t> recent);

  // distribution() and, unless greedy, exactly one draw from it.
  int64_t sample(float* logits, std::span<const int64_t> recent);

  // A uniform double in [0, 1) from the top 53 bits of one generator output.
  double uniform();

  // Draws the index of one candidate with probability proportional to its
  // prob (non-negative, not all zero): one uniform() against the running sum,
  // walking the candidates in order.
  size_t draw(std::span<const Candidate> candidates);

  const SamplingParams& params() const { return params_; }

 private:
  // Puts the m most likely ids first in order_, sorted (logit desc, id asc).
  void sort_prefix(const float* logits, int64_t m);

  int64_t vocab_;
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;
  std::vector<Candidate> kept_;
  std::vector<uint8_t> seen_;
  int64_t sorted_ = 0;  // length of the sorted prefix of order_
};

}  // namespace ssm
