#include "generation.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "cli/text_out.h"
#include "ssm/io/json.h"

namespace ssm::python {

std::vector<int64_t> default_stop_ids(const LanguageModel& model, const Tokenizer* tok) {
  const Json& src = model.config().source;
  if (src.contains("eos_token_id") && src["eos_token_id"].is_number_integer())
    return {src["eos_token_id"].get<int64_t>()};
  if (tok == nullptr) return {};
  if (const auto id = tok->token_to_id("<|endoftext|>")) return {*id};
  return {};
}

GenerationRun::GenerationRun(ModelPtr model, StatePtr state, GenerationRequest request, bool streaming)
    : model_(std::move(model)), state_(std::move(state)), request_(std::move(request)), streaming_(streaming) {
  state_->check_usable(*model_);
  if (state_->session.batch() != 1)
    throw Error(cat("generate: the state holds ", state_->session.batch(), " sequences; generate continues one"));
  // Text needs the tokenizer, and so do stop strings; ids alone do not.
  if (request_.text_out || !request_.config.stop_strings.empty()) tok_ = model_->get_tokenizer();
  request_.config.interrupt = &interrupt_;
  state_->in_use = true;
  if (streaming_) ++model_->streams;
  worker_ = std::thread([this] { run(); });
}

GenerationRun::~GenerationRun() {
  interrupt_ = true;
  join();
}

void GenerationRun::join() {
  if (worker_.joinable()) worker_.join();
}

void GenerationRun::push(Piece piece) {
  {
    std::lock_guard lock(mu_);
    pieces_.push_back(std::move(piece));
  }
  cv_.notify_one();
}

void GenerationRun::run() {
  try {
    std::lock_guard busy(model_->busy);
    Generator gen(model_->model, model_->ctx);
    const GenerationConfig& cfg = request_.config;
    std::optional<cli::TextOut> out;
    if (tok_) {
      gen.set_token_text([this](int64_t id) {
        return id < tok_->vocab_size() ? tok_->token_bytes(static_cast<int32_t>(id)) : std::string_view();
      });
      if (request_.text_out) out.emplace(*tok_, cfg.stop_strings, nullptr);
    }
    const auto is_stop_id = [&](int64_t id) {
      return std::find(cfg.stop_tokens.begin(), cfg.stop_tokens.end(), id) != cfg.stop_tokens.end();
    };
    // TextOut keeps everything it lets through; what grew is the new piece.
    size_t sent = 0;
    const auto send_text = [&] {
      if (out->text().size() > sent) push(out->text().substr(sent));
      sent = out->text().size();
    };
    const SequenceOutput result = gen.generate(state_->session, {request_.prompt}, cfg, [&](int64_t, int64_t id) {
      if (!out) return push(id);
      if (is_stop_id(id)) return;
      out->push(id);
      send_text();
    })[0];
    if (out) {
      out->finish(result.finish == FinishReason::kStopString);
      send_text();
      text_ = out->text();
    }
    tokens_ = result.tokens;
    finish_ = result.finish;
  } catch (...) {
    error_ = std::current_exception();
  }
  state_->in_use = false;
  if (streaming_) --model_->streams;
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_one();
}

std::optional<Piece> GenerationRun::next(int wait_ms, bool& ended) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return done_ || !pieces_.empty(); });
  ended = false;
  if (!pieces_.empty()) {
    Piece p = std::move(pieces_.front());
    pieces_.pop_front();
    return p;
  }
  if (!done_) return std::nullopt;
  ended = true;
  lock.unlock();
  join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::nullopt;
}

}  // namespace ssm::python
