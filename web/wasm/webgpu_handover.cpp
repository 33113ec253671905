// A generation whose forward passes run outside the module: the WebGPU
// backend (web/src/ssm_engine.mjs) computes the logits, the module does
// everything else as generate() does, from the same code: the request's
// options, the tokenizer, the sampler (the CLI's mt19937 draws), stop
// tokens and strings, the streamed text and the session's bookkeeping
// (pending, consumed, recent, position), so that state() writes the CLI's
// state file once the caller has handed over the state's tensors
// (setStateTensor, state_files.cpp).
//
// externalBegin(request) -> {feed, promptIds, maxTokens, argmaxOnly}: the
//   caller feeds `feed` (the pending token and the prompt) in one forward;
// then, per token, either externalStep(id) with the argmax of the last
//   logits (allowed when argmaxOnly: greedy without a repetition penalty,
//   where the sampler's choice is the argmax, ties to the smaller id), or
//   the logits written into externalLogits() and externalStep(-1);
//   each returns {token, piece, done}; unless done, the caller feeds token;
// externalEnd(timings) -> generate()'s result, plus the text's last piece.
#include <algorithm>
#include <span>

#include "model_module.h"

namespace ssm::web {

std::string Model::ExternalRun::new_text() {
  if (!out || out->text().size() <= sent) return {};
  const std::string piece = out->text().substr(sent);
  sent = out->text().size();
  return piece;
}

Model::ExternalRun& Model::running() {
  check_loaded();
  if (!run_) throw Error("no generation is running");
  return *run_;
}

val Model::externalBegin(const std::string& request) {
  return guarded([&] {
    check_loaded();
    run_.reset();
    auto run = std::make_unique<ExternalRun>();
    run->prompt = parse_request(request, run->cfg);
    const GenerationConfig& cfg = run->cfg;
    cfg.sampling.validate();
    for (const std::string& stop : cfg.stop_strings)
      if (stop.empty()) throw Error("a stop string is empty");
    const int64_t V = model_->config().vocab_size;
    run->sampler.emplace(V, cfg.sampling, cfg.seed);
    run->logits.assign(static_cast<size_t>(V), 0.f);
    run->history = session_.recent[0];
    run->history.insert(run->history.end(), run->prompt.begin(), run->prompt.end());
    run->stops.emplace(run->cfg.stop_strings);
    if (tok_) run->out.emplace(*tok_, run->cfg.stop_strings, nullptr);
    std::vector<int64_t> feed;
    if (session_.pending[0] >= 0) feed.push_back(session_.pending[0]);
    feed.insert(feed.end(), run->prompt.begin(), run->prompt.end());
    run->fed = static_cast<int64_t>(feed.size());
    // The caller feeds these now: the session has consumed them.
    session_.consumed[0] += run->fed;
    session_.model.position += run->fed;
    session_.pending[0] = -1;
    const bool argmax_only = cfg.sampling.greedy() && cfg.sampling.repeat_penalty == 1.f;
    run->done = cfg.max_new_tokens == 0;
    Json doc = {{"feed", feed},
                {"promptIds", run->prompt},
                {"maxTokens", cfg.max_new_tokens},
                {"argmaxOnly", argmax_only}};
    run_ = std::move(run);
    return json_value(doc);
  });
}

// Where the caller writes the last position's logits (vocab_size floats)
// before externalStep(-1). A view of the module's memory: fetch it again
// for every step (memory growth moves it).
val Model::externalLogits() {
  if (!run_) return error_value("no generation is running");
  return val(emscripten::typed_memory_view(run_->logits.size(), run_->logits.data()));
}

val Model::externalStep(double chosen) {
  return guarded([&] {
    ExternalRun& run = running();
    if (run.done) throw Error("the generation has ended");
    const int64_t V = model_->config().vocab_size;
    int64_t tok;
    if (chosen >= 0) {
      if (!(run.cfg.sampling.greedy() && run.cfg.sampling.repeat_penalty == 1.f))
        throw Error(
            "externalStep: only a greedy run without a repetition penalty takes the argmax");
      tok = static_cast<int64_t>(chosen);
      if (tok >= V) throw Error(cat("externalStep: token ", tok, " is outside the vocabulary"));
    } else {
      const int64_t n = std::min<int64_t>(run.cfg.sampling.repeat_last_n,
                                          static_cast<int64_t>(run.history.size()));
      tok = run.sampler->sample(run.logits.data(),
                                std::span<const int64_t>(run.history)
                                    .subspan(run.history.size() - static_cast<size_t>(n)));
    }
    // As Generator::generate: the stop token first, then stop strings, then the length.
    run.tokens.push_back(tok);
    run.history.push_back(tok);
    const bool stop_token = std::find(run.cfg.stop_tokens.begin(), run.cfg.stop_tokens.end(),
                                      tok) != run.cfg.stop_tokens.end();
    if (!stop_token && run.out) run.out->push(tok);
    if (stop_token) {
      run.finish = FinishReason::kStopToken;
      run.done = true;
    } else if (!run.cfg.stop_strings.empty() && run.stops->push(token_bytes(tok))) {
      run.finish = FinishReason::kStopString;
      run.done = true;
    } else if (static_cast<int64_t>(run.tokens.size()) >= run.cfg.max_new_tokens) {
      run.finish = FinishReason::kLength;
      run.done = true;
    }
    if (run.done) {
      session_.pending[0] = tok;
    } else {  // the caller feeds it next
      ++session_.consumed[0];
      ++session_.model.position;
      ++run.decoded;
    }
    return json_value({{"token", tok}, {"piece", run.new_text()}, {"done", run.done}});
  });
}

// timings: {prefillSeconds, decodeSeconds} measured by the caller.
val Model::externalEnd(const std::string& timings) {
  return guarded([&] {
    ExternalRun& run = running();
    if (run.out) run.out->finish(run.finish == FinishReason::kStopString);
    const std::string piece = run.new_text();
    const Json t = parse_json(timings, "timings");
    const size_t keep = std::min(run.history.size(), static_cast<size_t>(kSessionHistory));
    session_.recent[0].assign(run.history.end() - static_cast<std::ptrdiff_t>(keep),
                              run.history.end());
    Json doc = {{"promptIds", run.prompt},
                {"ids", run.tokens},
                {"text", run.out ? run.out->text() : std::string()},
                {"finish", finish_reason_name(run.finish)},
                {"seed", run.cfg.seed},
                {"stats",
                 {{"prefillTokens", run.fed},
                  {"prefillSeconds", field<double>(t, "prefillSeconds", 0)},
                  {"decodeTokens", run.decoded},
                  {"decodeSeconds", field<double>(t, "decodeSeconds", 0)}}},
                {"consumed", session_.consumed[0]},
                {"piece", piece}};
    run_.reset();
    return json_value(doc);
  });
}

// Drops a generation the caller could not finish (its forward failed).
void Model::externalAbort() { run_.reset(); }

}  // namespace ssm::web
