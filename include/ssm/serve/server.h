// The HTTP server of `ssm serve` (cpp-httplib): OpenAI's completions and
// chat completions, models, health, Prometheus metrics and the session
// routes, over one SessionStore and one Scheduler per replica (a copy of the
// model on one device: the CPU, or a GPU). A session's requests run on the
// replica it is placed on, one after the other; sessions on different
// replicas run at the same time.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ssm/model/language_model.h"
#include "ssm/serve/metrics.h"
#include "ssm/serve/request.h"
#include "ssm/serve/scheduler.h"
#include "ssm/serve/session_store.h"
#include "ssm/tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ssm::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  std::filesystem::path sessions_dir;
  size_t max_sessions_memory = 64;
  int64_t max_batch = 16;
  int64_t max_queue = 64;         // requests waiting (for a session or a batch row) before 429
  int64_t prefill_chunk = 256;    // prompt tokens prefilled between two decode steps
  size_t max_body_bytes = 1 << 20;
  std::string api_key;            // empty: no authentication
  std::string model_name;         // what /v1/models lists and responses name
  RequestLimits limits;
};

// One copy of the model on one device, and the context that computes it.
struct Replica {
  LanguageModel* model = nullptr;
  Context* ctx = nullptr;
  std::string device;  // as /v1/replicas shows it: "cpu", "cuda:0"
};

class Server {
 public:
  // The replicas' models and contexts (all of the same weights) and the
  // tokenizer must outlive the server; a context is used by its replica's
  // scheduler thread only.
  Server(std::vector<Replica> replicas, const Tokenizer& tokenizer, std::string fingerprint,
         ServerOptions options);
  Server(LanguageModel& model, Context& ctx, const Tokenizer& tokenizer, std::string fingerprint,
         ServerOptions options)
      : Server({Replica{&model, &ctx, device_str(ctx.device())}}, tokenizer, std::move(fingerprint),
               std::move(options)) {}
  ~Server();

  // Binds the socket; returns the port (useful with port 0). ssm::Error when
  // the address cannot be bound.
  int bind();
  // Serves until stop(); requests in flight finish (and save their sessions)
  // before it returns.
  void run();
  // From any thread (a signal watcher): takes no new connection, answers a
  // request that comes on a kept-alive connection afterwards with 503,
  // closes the connections that wait idle between requests, and returns
  // once run() has returned (every request in flight answered).
  void stop();

 private:
  struct Exchange;
  void routes();
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream(std::shared_ptr<Exchange> ex, httplib::Response& res);
  MetricsSnapshot snapshot();
  // Connections between a request's routing and the end of its response,
  // by "peer_addr:peer_port": the ones stop() must not close.
  void mark_busy(const httplib::Request& req, bool busy);
  void close_idle_connections();

  // A request in flight on a replica, counted from its lease to its end.
  class InFlight;

  std::vector<Replica> replicas_;
  const Tokenizer& tokenizer_;
  ServerOptions options_;
  std::vector<int64_t> stop_tokens_;
  Metrics metrics_;
  std::unique_ptr<std::atomic<int64_t>[]> in_flight_;  // per replica
  SessionStore store_;
  std::vector<std::unique_ptr<Scheduler>> schedulers_;  // per replica
  std::atomic<int64_t> waiting_{0};  // requests accepted, not yet in the batch
  std::atomic<int64_t> next_id_{0};
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> stopping_{false}, serving_{false};
  std::mutex busy_mutex_;
  std::map<std::string, int> busy_;
};

}  // namespace ssm::serve
