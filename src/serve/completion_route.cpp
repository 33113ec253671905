// POST /v1/completions and /v1/chat/completions: parse, lease the session,
// run the job on the scheduler, answer at once or as server-sent events,
// and save the session before the last byte goes out. A client that
// disconnects cancels its job, streaming or not.
#include <httplib.h>

#include <chrono>
#include <random>
#include <thread>

#include "ssm/core/error.h"
#include "ssm/serve/api_error.h"
#include "ssm/serve/server.h"
#include "serve/connection.h"
#include "serve/exchange.h"

namespace ssm::serve {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

void Server::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  const std::string route = chat ? "/v1/chat/completions" : "/v1/completions";
  auto ex = std::make_shared<Exchange>();
  ex->arrived = Clock::now();
  bool counted_waiting = false, submitted = false;
  try {
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception& e) {
      throw ApiError(400, cat("invalid JSON in the request body: ", e.what()));
    }
    ex->request = parse_completion_request(body, chat, options_.limits);
    CompletionRequest& r = ex->request;
    if (!r.model.empty() && r.model != options_.model_name)
      throw ApiError(404, cat("The model '", r.model, "' does not exist; this server serves '", options_.model_name, "'"),
                     "model", "invalid_request_error", "model_not_found");
    std::vector<int64_t> prompt = r.prompt_ids;
    if (r.prompt_text || chat)
      for (const int32_t id : tokenizer_.encode(chat ? render_chat(r.messages) : *r.prompt_text)) prompt.push_back(id);
    for (const int64_t id : prompt)
      if (id >= options_.limits.vocab_size)
        throw ApiError(400, cat("the prompt's token ", id, " is outside the model's vocabulary"), "prompt");
    if (static_cast<int64_t>(prompt.size()) > options_.limits.max_prompt_tokens)
      throw ApiError(400,
                     cat("the prompt has ", prompt.size(), " tokens, more than the limit of ",
                         options_.limits.max_prompt_tokens),
                     chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded");
    if (waiting_.fetch_add(1) >= options_.max_queue) {
      waiting_.fetch_sub(1);
      throw ApiError(429, "the server is busy: too many requests are waiting; retry later", "",
                     "rate_limit_error", "queue_full");
    }
    counted_waiting = true;
    // The session's replica (placed on its first use), or the least loaded
    // one for a request without a session.
    int replica = 0;
    if (!r.session.empty()) {
      ex->lease = store_.acquire(r.session, true);
      replica = ex->lease->replica();
    } else {
      replica = store_.least_loaded();
      ex->scratch = make_session(*replicas_[static_cast<size_t>(replica)].model, 1);
    }
    ex->in_flight = std::make_unique<InFlight>(in_flight_[static_cast<size_t>(replica)]);
    if (prompt.empty() && ex->state().pending[0] < 0)
      throw ApiError(400, r.session.empty() ? "the prompt is empty"
                                            : cat("the prompt is empty and session '", r.session, "' has nothing to continue from"),
                     chat ? "messages" : "prompt");
    ex->prompt_tokens = prompt.size();
    ex->id = cat(chat ? "chatcmpl-" : "cmpl-", next_id_.fetch_add(1));
    ex->created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    ex->text = TextStream(r.stop.empty() && chat ? std::vector<std::string>{"\nuser:"} : r.stop);

    Job& job = *ex->job;
    job.session = &ex->state();
    job.prompt = std::move(prompt);
    job.sampling.temperature = r.temperature;
    job.sampling.top_p = r.top_p;
    job.seed = r.seed ? *r.seed : fresh_seed();
    job.max_tokens = r.max_tokens;
    job.stop_tokens = stop_tokens_;
    Exchange* raw = ex.get();
    job.on_token = [this, raw](int64_t tok) {
      if (!raw->first_token_seen) {
        raw->first_token_seen = true;
        metrics_.observe_first_token(std::chrono::duration<double>(Clock::now() - raw->arrived).count());
      }
      if (std::find(stop_tokens_.begin(), stop_tokens_.end(), tok) != stop_tokens_.end()) return false;
      const std::lock_guard lock(raw->text_mutex);
      const bool stop = raw->text.push(tokenizer_.token_bytes(static_cast<int32_t>(tok)));
      raw->text_changed.notify_all();
      return stop;
    };
    if (!schedulers_[static_cast<size_t>(replica)]->submit(ex->job))
      throw ApiError(429, "the server is busy: the batch queue is full; retry later", "", "rate_limit_error",
                     "queue_full");
    submitted = true;
    ex->submitted = true;
    if (r.stream) {
      stream(ex, res);
      waiting_.fetch_sub(1);  // the provider runs after this handler returns
      counted_waiting = false;
      metrics_.count_request(route, 200);
      return;
    }
    // The client may leave while its job runs: its socket, polled between
    // decode steps, tells (cpp-httplib 0.11 has no call for it). Cancelled,
    // the job stops at its next token and the session keeps what it reached.
    const int fd = find_connection_socket(req.remote_addr, req.remote_port, req.local_port);
    while (!job.wait_for(std::chrono::milliseconds(10)))
      if (fd >= 0 && !job.cancelled.load() && peer_closed(fd)) job.cancelled = true;
    waiting_.fetch_sub(1);
    counted_waiting = false;
    if (job.finish == Finish::kError) throw ApiError(500, cat("generation failed: ", job.error), "", "server_error");
    ex->save();
    if (!ex->save_error.empty()) throw ApiError(500, cat("the session could not be saved: ", ex->save_error), "session", "server_error");
    json out = ex->envelope(chat ? "chat.completion" : "text_completion", options_.model_name);
    out["choices"] = json::array({ex->choice(json_text(ex->text.text()), finish_name(job.finish), false)});
    out["usage"] = ex->usage();
    out["ssm"] = ex->extension();
    res.status = 200;
    res.set_content(dump(out), "application/json");
    metrics_.observe_latency(std::chrono::duration<double>(Clock::now() - ex->arrived).count());
  } catch (const ApiError& e) {
    if (counted_waiting) waiting_.fetch_sub(1);
    if (submitted && !ex->job->done()) {  // submitted: let it finish before the lease goes
      ex->job->cancelled = true;
      ex->job->wait();
    }
    res.status = e.status();
    res.set_content(dump(error_body(e)), "application/json");
  }
  metrics_.count_request(route, res.status);
}

}  // namespace ssm::serve
