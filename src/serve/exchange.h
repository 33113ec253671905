// What one completion request owns while it runs, shared by its handler and,
// when it streams, by the content provider that outlives the handler.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "ssm/serve/server.h"
#include "ssm/serve/text_stream.h"

namespace ssm::serve {

using json = nlohmann::json;

inline std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
inline const char* finish_name(Finish f) { return f == Finish::kStop ? "stop" : "length"; }

// Everything one request owns while it runs, shared by the handler and the
// streaming provider (which outlives the handler).
// Counts a request in flight on its replica (the least-loaded placement
// reads the counts), from its lease until its exchange ends.
class Server::InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& count) : count_(count) { ++count_; }
  ~InFlight() { --count_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& count_;
};

struct Server::Exchange {
  std::unique_ptr<InFlight> in_flight;  // destroyed last: after the job and the save
  CompletionRequest request;
  std::string id;
  int64_t created = 0;
  size_t prompt_tokens = 0;
  std::unique_ptr<SessionStore::Lease> lease;
  SessionState scratch;  // the state of a request without a session
  std::shared_ptr<Job> job = std::make_shared<Job>();
  std::mutex text_mutex;
  std::condition_variable text_changed;
  TextStream text{{}};
  std::chrono::steady_clock::time_point arrived;
  bool first_token_seen = false;  // the scheduler's thread only
  bool submitted = false;  // the scheduler has the job: it must finish before the state goes
  bool saved = false;
  std::string save_error;

  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  // A stream whose client left before its provider ran ends here: the job
  // is stopped and the state it reached saved, before the lease goes.
  ~Exchange() {
    if (!submitted) return;
    if (!job->done()) {
      job->cancelled = true;
      job->wait();
    }
    if (job->finish != Finish::kError) save();
  }

  SessionState& state() { return lease ? lease->state() : scratch; }
  // Writes the session after the job, once; a failure is reported to the client.
  void save() {
    if (saved || !lease) return;
    saved = true;
    try {
      lease->save();
    } catch (const std::exception& e) {
      save_error = e.what();
    }
  }
  json choice(const std::string& text, const json& finish, bool chunk) const {
    json c = {{"index", 0}, {"finish_reason", finish}};
    if (!request.chat) {
      c["text"] = text;
      c["logprobs"] = nullptr;
    } else if (chunk) {
      c["delta"] = finish.is_null() ? json{{"role", "assistant"}, {"content", text}} : json::object();
    } else {
      c["message"] = {{"role", "assistant"}, {"content", text}};
    }
    return c;
  }
  json envelope(const std::string& object, const std::string& model) const {
    json j = {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
    if (!request.session.empty()) j["session"] = request.session;
    return j;
  }
  // Beyond OpenAI's fields: the ids generated and the session's length
  // after the request (clients that do not know them ignore them).
  json extension() const {
    return {{"completion_ids", job->tokens}, {"session_tokens", job->session ? job->session->consumed[0] : 0}};
  }
  json usage() const {
    const auto n = static_cast<int64_t>(job->tokens.size());
    return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", n},
            {"total_tokens", static_cast<int64_t>(prompt_tokens) + n}};
  }
};

}  // namespace ssm::serve
