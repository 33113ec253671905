// Text generation: prefill of a batch of independent sequences, then
// token-by-token decoding in constant memory per sequence, each sequence with
// its own prompt, sampler and stop conditions. Generation continues from, and
// leaves behind, a SessionState: the durable memory of a conversation.
//
// Resuming: after a call, every token a sequence has seen is consumed into the
// model state except the last sampled one, which is kept as `pending`. The
// next call feeds the pending token first and then its prompt, so a call with
// prompt b after a call with prompt a computes exactly what one sequence
// a + generated + b would.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ssm/model/language_model.h"
#include "ssm/model/sampler.h"

namespace ssm {

// How many recent tokens a session keeps for the repetition penalty.
inline constexpr int64_t kSessionHistory = 256;

struct SessionState {
  ModelState model;                          // every consumed token
  std::vector<int64_t> pending;              // per sequence: sampled, not consumed; -1: none
  std::vector<std::vector<int64_t>> recent;  // per sequence: the last kSessionHistory tokens seen
  std::vector<int64_t> consumed;             // per sequence: tokens consumed into the state
  int64_t batch() const { return model.batch; }
};

SessionState make_session(const LanguageModel& model, int64_t batch);

struct GenerationConfig {
  SamplingParams sampling;
  uint64_t seed = 0;  // sequence b draws from a generator seeded with seed + b
  int64_t max_new_tokens = 128;
  std::vector<int64_t> stop_tokens;
  std::vector<std::string> stop_strings;  // matched on token bytes (see set_token_text)
  // When it reads true (set from a signal handler, say), every sequence stops
  // after the token it just chose, with the state reached so far.
  const std::atomic<bool>* interrupt = nullptr;
};

enum class FinishReason { kLength, kStopToken, kStopString, kInterrupted };
const char* finish_reason_name(FinishReason reason);

struct SequenceOutput {
  std::vector<int64_t> tokens;  // the new tokens, the stop token included
  FinishReason finish = FinishReason::kLength;
};

struct GenerationStats {
  int64_t prefill_tokens = 0;
  double prefill_seconds = 0;
  int64_t decode_tokens = 0;  // tokens consumed by decode steps, over all sequences
  double decode_seconds = 0;
};

// Called for each chosen token, as it is chosen.
using TokenCallback = std::function<void(int64_t sequence, int64_t token)>;
// The bytes a token stands for (a tokenizer's), for stop strings.
using TokenText = std::function<std::string_view(int64_t token)>;

class Generator {
 public:
  // model and ctx must outlive the generator.
  Generator(LanguageModel& model, Context& ctx) : model_(model), ctx_(ctx) {}

  void set_token_text(TokenText fn) { token_text_ = std::move(fn); }

  // prompts: one per sequence of session (may be empty when that sequence has
  // a pending token). Sequences that stop early keep the state they stopped
  // with. ssm::Error for bad ids, an empty sequence or a bad config.
  std::vector<SequenceOutput> generate(SessionState& session,
                                       const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerationConfig& config,
                                       const TokenCallback& on_token = nullptr);

  // Timing of the last generate().
  const GenerationStats& stats() const { return stats_; }

 private:
  // Consumes pending + prompt of every sequence; leaves logits_ (B, V).
  void prefill(SessionState& session, const std::vector<std::vector<int64_t>>& prompts);

  LanguageModel& model_;
  Context& ctx_;
  TokenText token_text_;
  GenerationStats stats_;
  Tensor logits_;  // (B, V): the prefill's last-position logits
};

}  // namespace ssm
