// A generation running on its own thread, handing out its text (or ids)
// piece by piece. The Python thread waits with the GIL released and wakes
// often enough to see Ctrl-C, which stops the generation after its current
// token, the state kept as reached (as `ssm generate` does).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "py_model.h"

namespace ssm::python {

// A piece of output: text for a text prompt, a token id for an ids prompt.
using Piece = std::variant<std::string, int64_t>;

struct GenerationRequest {
  std::vector<int64_t> prompt;
  bool text_out = true;  // decode to text (a text prompt) or hand out ids
  GenerationConfig config;
};

class GenerationRun {
 public:
  // Starts generating on a worker thread; state is marked in use until it ends.
  GenerationRun(ModelPtr model, StatePtr state, GenerationRequest request, bool streaming);
  ~GenerationRun();  // stops the generation (after its current token) and joins
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // The next piece, nullopt once the generation has ended; waits up to
  // wait_ms. `ended` says which. Rethrows the generation's error.
  std::optional<Piece> next(int wait_ms, bool& ended);
  void interrupt() { interrupt_ = true; }
  void join();

  const std::string& text() const { return text_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }
  FinishReason finish() const { return finish_; }
  uint64_t seed() const { return request_.config.seed; }
  const StatePtr& state() const { return state_; }

 private:
  void run();
  void push(Piece piece);

  ModelPtr model_;
  StatePtr state_;
  GenerationRequest request_;
  std::shared_ptr<Tokenizer> tok_;
  bool streaming_;
  std::atomic<bool> interrupt_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> pieces_;
  bool done_ = false;
  std::exception_ptr error_;
  std::string text_;
  std::vector<int64_t> tokens_;
  FinishReason finish_ = FinishReason::kLength;
  std::thread worker_;
};

// The end-of-text token: config.json's eos_token_id, else the tokenizer's
// <|endoftext|> (none without either), as `ssm generate` picks it.
std::vector<int64_t> default_stop_ids(const LanguageModel& model, const Tokenizer* tok);

}  // namespace ssm::python
