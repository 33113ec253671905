#include "ssm/model/generator.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "model/stop_matcher.h"
#include "ssm/ops/elementwise.h"

namespace ssm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Recent tokens of one sequence in a buffer that never reallocates: it holds
// up to 2W and drops the oldest W when full, so the last W are contiguous.
class History {
 public:
  explicit History(int64_t window) : window_(std::max<int64_t>(window, 1)) {
    tokens_.reserve(static_cast<size_t>(2 * window_));
  }
  void push(int64_t token) {
    if (static_cast<int64_t>(tokens_.size()) == 2 * window_)
      tokens_.erase(tokens_.begin(), tokens_.begin() + window_);
    tokens_.push_back(token);
  }
  std::span<const int64_t> last(int64_t n) const {
    const size_t k = std::min(tokens_.size(), static_cast<size_t>(n));
    return std::span<const int64_t>(tokens_).subspan(tokens_.size() - k);
  }

 private:
  int64_t window_;
  std::vector<int64_t> tokens_;
};

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStopToken:
      return "stop token";
    case FinishReason::kStopString:
      return "stop string";
    case FinishReason::kInterrupted:
      return "interrupt";
  }
  return "?";
}

SessionState make_session(const LanguageModel& model, int64_t batch) {
  SessionState s;
  s.model = model.make_state(batch);
  s.pending.assign(static_cast<size_t>(batch), -1);
  s.recent.resize(static_cast<size_t>(batch));
  s.consumed.assign(static_cast<size_t>(batch), 0);
  return s;
}

void Generator::prefill(SessionState& session, const std::vector<std::vector<int64_t>>& prompts) {
  const int64_t B = session.batch(), V = model_.config().vocab_size;
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    if (session.pending[b] >= 0) seqs[b].push_back(session.pending[b]);
    seqs[b].insert(seqs[b].end(), prompts[b].begin(), prompts[b].end());
    if (seqs[b].empty())
      throw Error(cat("sequence ", b, " has no token to start from: give it a prompt"));
  }
  auto ids_of = [](const std::vector<int64_t>& s, int64_t rows) {
    Tensor ids = Tensor::empty(DType::kI64, {rows, static_cast<int64_t>(s.size()) / rows});
    std::copy(s.begin(), s.end(), ids.data<int64_t>());
    return ids;
  };
  const bool same_length = std::all_of(seqs.begin(), seqs.end(),
                                       [&](const auto& s) { return s.size() == seqs[0].size(); });
  if (same_length) {
    std::vector<int64_t> all;
    for (const auto& s : seqs) all.insert(all.end(), s.begin(), s.end());
    logits_ = model_.forward(ids_of(all, B), &session.model, ctx_, true).reshape({B, V});
  } else {
    // Ragged prompts: each sequence alone, through a state of one.
    logits_ = Tensor::empty(DType::kF32, {B, V}, ctx_.device());
    ModelState one = model_.make_state(1);
    for (int64_t b = 0; b < B; ++b) {
      copy_state_row(one, 0, session.model, b, ctx_);
      const Tensor logits = model_.forward(ids_of(seqs[b], 1), &one, ctx_, true);
      copy_state_row(session.model, b, one, 0, ctx_);
      ops::copy(ctx_, logits_.rows(b, b + 1), logits.reshape({1, V}));
    }
    int64_t longest = 0;
    for (const auto& s : seqs) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
    session.model.position += longest;
  }
  for (int64_t b = 0; b < B; ++b) {
    session.consumed[b] += static_cast<int64_t>(seqs[b].size());
    session.pending[b] = -1;
    stats_.prefill_tokens += static_cast<int64_t>(seqs[b].size());
  }
}

std::vector<SequenceOutput> Generator::generate(SessionState& session,
                                                const std::vector<std::vector<int64_t>>& prompts,
                                                const GenerationConfig& config,
                                                const TokenCallback& on_token) {
  const int64_t B = session.batch(), V = model_.config().vocab_size;
  if (static_cast<int64_t>(prompts.size()) != B)
    throw Error(cat(prompts.size(), " prompts for a session of ", B, " sequences"));
  if (config.max_new_tokens < 0)
    throw Error(cat("max new tokens must be >= 0, got ", config.max_new_tokens));
  config.sampling.validate();
  if (!config.stop_strings.empty() && !token_text_)
    throw Error("stop strings need the token text: call set_token_text");
  for (const std::string& s : config.stop_strings)
    if (s.empty()) throw Error("a stop string is empty");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t id : prompts[b])
      if (id < 0 || id >= V)
        throw Error(cat("prompt token ", id, " of sequence ", b, " is outside the vocabulary [0, ",
                        V, ")"));
  stats_ = GenerationStats{};

  // Everything the loop touches is made here, before it starts.
  const int64_t window = std::max(config.sampling.repeat_last_n, kSessionHistory);
  std::vector<Sampler> samplers;
  std::vector<History> history;
  std::vector<StopMatcher> stops;
  std::vector<SequenceOutput> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    samplers.emplace_back(V, config.sampling, config.seed + static_cast<uint64_t>(b));
    history.emplace_back(window);
    for (int64_t t : session.recent[b]) history[b].push(t);
    for (int64_t t : prompts[b]) history[b].push(t);
    stops.emplace_back(config.stop_strings);
    out[b].tokens.reserve(static_cast<size_t>(std::min<int64_t>(config.max_new_tokens, 1 << 16)));
  }
  std::vector<int64_t> feed(static_cast<size_t>(B));
  std::vector<char> active(static_cast<size_t>(B), config.max_new_tokens > 0);
  std::vector<char> restore(static_cast<size_t>(B), 0);
  ModelState stopped;  // states of sequences that stopped while others went on
  if (B > 1) stopped = model_.make_state(B);

  auto t0 = std::chrono::steady_clock::now();
  prefill(session, prompts);
  stats_.prefill_seconds = seconds_since(t0);
  // KV caches get room for every token the loop may append.
  const int64_t longest = *std::max_element(session.consumed.begin(), session.consumed.end());
  reserve_state(session.model, longest + config.max_new_tokens, ctx_);
  if (B > 1) reserve_state(stopped, longest + config.max_new_tokens, ctx_);

  t0 = std::chrono::steady_clock::now();
  // Samplers read (and change) logits on the host: a device backend's are
  // copied back once per step. Their rows are ld apart (a step's are
  // padded: LanguageModel::step).
  Tensor host_logits;
  int64_t ld = V;
  auto on_host = [&host_logits, &ld](Tensor& t) -> float* {
    Tensor& h = t.device().is_host() ? t : (host_logits = t.to(Device::host()));
    ld = h.row_stride();
    return h.data<float>();
  };
  float* logits = on_host(logits_);
  int64_t n_active = config.max_new_tokens > 0 ? B : 0;
  while (n_active > 0) {
    for (int64_t b = 0; b < B; ++b) {
      if (!active[b]) continue;
      const int64_t tok =
          samplers[b].sample(logits + b * ld, history[b].last(config.sampling.repeat_last_n));
      out[b].tokens.push_back(tok);
      history[b].push(tok);
      session.pending[b] = tok;
      if (on_token) on_token(b, tok);
      bool done = true;
      if (std::find(config.stop_tokens.begin(), config.stop_tokens.end(), tok) !=
          config.stop_tokens.end())
        out[b].finish = FinishReason::kStopToken;
      else if (!config.stop_strings.empty() && stops[b].push(token_text_(tok)))
        out[b].finish = FinishReason::kStopString;
      else if (static_cast<int64_t>(out[b].tokens.size()) >= config.max_new_tokens)
        out[b].finish = FinishReason::kLength;
      else if (config.interrupt != nullptr && config.interrupt->load(std::memory_order_relaxed))
        out[b].finish = FinishReason::kInterrupted;
      else
        done = false;
      if (done) {
        active[b] = 0;
        --n_active;
        if (B > 1) {
          copy_state_row(stopped, b, session.model, b, ctx_);
          restore[b] = 1;
        }
      }
    }
    if (n_active == 0) break;
    // Stopped sequences are fed too (their state is restored afterwards), so
    // the batch keeps its shape.
    for (int64_t b = 0; b < B; ++b) feed[b] = session.pending[b];
    logits = on_host(model_.step(feed.data(), session.model, ctx_));
    for (int64_t b = 0; b < B; ++b)
      if (active[b]) {
        ++session.consumed[b];
        ++stats_.decode_tokens;
        session.pending[b] = -1;
      }
  }
  stats_.decode_seconds = seconds_since(t0);

  for (int64_t b = 0; b < B; ++b) {
    if (restore[b]) copy_state_row(session.model, b, stopped, b, ctx_);
    // pending was cleared when consumed; the last token of each is pending.
    if (!out[b].tokens.empty()) session.pending[b] = out[b].tokens.back();
    const std::span<const int64_t> h = history[b].last(kSessionHistory);
    session.recent[b].assign(h.begin(), h.end());
  }
  return out;
}

}  // namespace ssm
