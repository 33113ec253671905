// Routes other than the completions, authentication and error bodies.
#include "ssm/serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <thread>

#include "serve/connection.h"
#include "ssm/core/error.h"
#include "ssm/serve/api_error.h"

namespace ssm::serve {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), error_body(e)); }

json session_json(const SessionInfo& s, const std::vector<Replica>& replicas) {
  return {{"id", s.id},           {"object", "session"},
          {"tokens", s.consumed}, {"pending_token", s.pending},
          {"bytes", s.bytes},     {"last_used", static_cast<int64_t>(s.last_use)},
          {"replica", s.replica}, {"device", replicas.at(static_cast<size_t>(s.replica)).device}};
}

// A route's JSON body, an object whose keys are all among `allowed`.
json object_body(const std::string& text, std::initializer_list<const char*> allowed) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw ApiError(400, cat("invalid JSON in the request body: ", e.what()));
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& item : body.items()) {
    const std::string& key = item.key();  // (clang 14 cannot capture a structured binding)
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) ==
        allowed.end())
      throw ApiError(400, cat("'", key, "': unknown field"), key);
  }
  return body;
}

// The eos token stops a completion: config.json's eos_token_id, else the
// tokenizer's <|endoftext|>.
std::vector<int64_t> end_of_text(const LanguageModel& model, const Tokenizer& tok) {
  const Json& src = model.config().source;
  if (src.contains("eos_token_id") && src["eos_token_id"].is_number_integer())
    return {src["eos_token_id"].get<int64_t>()};
  if (const auto id = tok.token_to_id("<|endoftext|>")) return {*id};
  return {};
}

std::vector<const LanguageModel*> models_of(const std::vector<Replica>& replicas) {
  SSM_CHECK(!replicas.empty(), "a server needs at least one replica");
  std::vector<const LanguageModel*> out;
  for (const Replica& r : replicas) out.push_back(r.model);
  return out;
}

}  // namespace

Server::Server(std::vector<Replica> replicas, const Tokenizer& tokenizer, std::string fingerprint,
               ServerOptions options)
    : replicas_(std::move(replicas)),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      stop_tokens_(end_of_text(*models_of(replicas_).front(), tokenizer)),
      in_flight_(std::make_unique<std::atomic<int64_t>[]>(replicas_.size())),
      store_(options_.sessions_dir, options_.max_sessions_memory, models_of(replicas_),
             std::move(fingerprint),
             [this](int r) { return in_flight_[static_cast<size_t>(r)].load(); }),
      http_(std::make_unique<httplib::Server>()) {
  for (const Replica& r : replicas_)
    schedulers_.push_back(std::make_unique<Scheduler>(*r.model, *r.ctx, options_.max_batch,
                                                      options_.max_queue, options_.prefill_chunk));
  options_.limits.vocab_size = replicas_.front().model->config().vocab_size;
  routes();
}

Server::~Server() = default;

int Server::bind() {
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second server on the same port would silently share its connections.
  // The socket is remembered to widen its backlog below.
  socket_t listening = INVALID_SOCKET;
  http_->set_socket_options([&listening](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = sock;
  });
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0) throw Error(cat("cannot listen on ", options_.host, ":", options_.port, " (in use or not an address here)"));
  // Debian's compiled cpp-httplib 0.11 listens with a backlog of 5: when
  // more clients connect at once than the accept loop has taken, the kernel
  // drops their handshakes (ListenOverflows in /proc/net/netstat) and some
  // clients got no response at all. Calling listen() again on a listening
  // socket only changes its backlog (Linux, POSIX); the kernel caps it at
  // net.core.somaxconn.
  if (listening == INVALID_SOCKET || ::listen(listening, SOMAXCONN) != 0)
    throw Error(cat("cannot widen the listen backlog on ", options_.host, ":", port));
  port_ = port;
  serving_ = true;
  return port;
}

void Server::run() {
  if (!stopping_) http_->listen_after_bind();
  serving_ = false;
}

void Server::stop() {
  stopping_ = true;
  // httplib's stop() closes the listening socket; a connection then ends
  // after its current request. But one that waits idle for its next request
  // would hold its thread, and run(), until the keep-alive timeout: those
  // are closed here, until run() returns.
  bool stopped = false;
  while (serving_) {
    if (!stopped && http_->is_running()) {
      http_->stop();
      stopped = true;
    }
    if (stopped) close_idle_connections();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Server::mark_busy(const httplib::Request& req, bool busy) {
  const std::string peer = peer_key(req.remote_addr, req.remote_port);
  const std::lock_guard lock(busy_mutex_);
  if (busy) {
    ++busy_[peer];
  } else {
    busy_.erase(peer);
  }
}

void Server::close_idle_connections() {
  // Idle: no request of it between routing and the end of its response, and
  // no byte of a next request received. (A request whose first bytes arrive
  // just as it is closed sees the connection close, as with any server that
  // closes an idle keep-alive connection; HTTP clients retry those.)
  for (const auto& [fd, peer] : connection_sockets(port_)) {
    {
      const std::lock_guard lock(busy_mutex_);
      if (busy_.count(peer) != 0) continue;
    }
    if (unread_bytes(fd) == 0 && peer_of(fd) == peer) ::shutdown(fd, SHUT_RDWR);
  }
}

MetricsSnapshot Server::snapshot() {
  SchedulerStats s;
  for (const auto& sched : schedulers_) {
    const SchedulerStats one = sched->stats();
    s.queued += one.queued;
    s.running += one.running;
    s.prefilling += one.prefilling;
    s.prompt_tokens += one.prompt_tokens;
    s.generated_tokens += one.generated_tokens;
    s.steps += one.steps;
    s.batched_rows += one.batched_rows;
    s.cancelled += one.cancelled;
  }
  MetricsSnapshot m;
  m.queue_length = s.queued;
  m.in_flight = waiting_.load();
  m.running = s.running;
  m.sessions_in_memory = static_cast<int64_t>(store_.in_memory());
  m.sessions_on_disk = static_cast<int64_t>(store_.on_disk());
  m.prompt_tokens = s.prompt_tokens;
  m.generated_tokens = s.generated_tokens;
  m.decode_steps = s.steps;
  m.batched_rows = s.batched_rows;
  m.prefilling = s.prefilling;
  m.cancelled = s.cancelled;
  const std::vector<int64_t> placed = store_.placed_per_replica();
  for (size_t r = 0; r < replicas_.size(); ++r)
    m.replicas.push_back({replicas_[r].device, placed[r], in_flight_[r].load()});
  return m;
}

void Server::routes() {
  httplib::Server& h = *http_;
  // Handlers wait for their session and their batch row, so the pool holds
  // one thread per request the queue admits, plus the running batch.
  const size_t threads = static_cast<size_t>(std::min<int64_t>(options_.max_queue + options_.max_batch + 4, 512));
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_payload_max_length(options_.max_body_bytes);
  h.set_keep_alive_timeout(30);
  // The logger runs once a response has been written: the connection is
  // idle again from then on.
  h.set_logger([this](const httplib::Request& req, const httplib::Response&) { mark_busy(req, false); });
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    mark_busy(req, true);
    if (stopping_) {
      res.set_header("Connection", "close");
      send_json(res, 503, error_body(503, "the server is shutting down", "", "server_error", "shutting_down"));
      metrics_.count_request(req.path, 503);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 401,
              error_body(401, req.has_header("Authorization") ? "Incorrect API key provided"
                                                               : "Missing API key: send 'Authorization: Bearer KEY'",
                         "", "authentication_error", "invalid_api_key"));
    metrics_.count_request(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 404   ? cat("no route ", req.method, " ", req.path)
                            : res.status == 413 ? "the request body is too large"
                                                : cat("HTTP ", res.status);
    send_json(res, res.status, error_body(res.status, msg));
  });
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    send_json(res, 500, error_body(500, msg));
  });

  h.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
  h.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
    metrics_.count_request("/health", 200);
  });
  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"},
                         {"data", json::array({{{"id", options_.model_name}, {"object", "model"}, {"created", 0},
                                                {"owned_by", "ssm"}}})}});
    metrics_.count_request("/v1/models", 200);
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(snapshot()), "text/plain; version=0.0.4");
    metrics_.count_request("/metrics", 200);
  });
  const auto session_route = [this](const std::string& name, auto&& fn) {
    return [this, name, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        check_session_id(req.matches[1], "id");
        fn(std::string(req.matches[1]), req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
      metrics_.count_request(name, res.status);
    };
  };
  h.Get(R"(/v1/sessions/([^/]+))",
        session_route("/v1/sessions/{id}", [this](const std::string& id, const httplib::Request&, httplib::Response& res) {
          const auto info = store_.info(id);
          if (!info) throw ApiError(404, cat("no session '", id, "'"), "id", "invalid_request_error", "session_not_found");
          send_json(res, 200, session_json(*info, replicas_));
        }));
  h.Delete(R"(/v1/sessions/([^/]+))",
           session_route("/v1/sessions/{id}", [this](const std::string& id, const httplib::Request&, httplib::Response& res) {
             if (!store_.erase(id))
               throw ApiError(404, cat("no session '", id, "'"), "id", "invalid_request_error", "session_not_found");
             send_json(res, 200, {{"id", id}, {"object", "session.deleted"}, {"deleted", true}});
           }));
  h.Post(R"(/v1/sessions/([^/]+)/fork)",
         session_route(
             "/v1/sessions/{id}/fork",
             [this](const std::string& id, const httplib::Request& req, httplib::Response& res) {
               const json body = object_body(req.body, {"id"});
               if (!body.contains("id") || !body["id"].is_string())
                 throw ApiError(400, "'id': the new session's id is required, as a string", "id");
               const std::string to = body["id"].get<std::string>();
               check_session_id(to, "id");
               send_json(res, 200, session_json(store_.fork(id, to), replicas_));
             }));
  // Moves a session to another replica between two of its requests (the
  // move waits for a request running on it), through its state file.
  h.Post(R"(/v1/sessions/([^/]+)/move)",
         session_route("/v1/sessions/{id}/move", [this](const std::string& id,
                                                        const httplib::Request& req,
                                                        httplib::Response& res) {
           const json body = object_body(req.body, {"replica"});
           if (!body.contains("replica") || !body["replica"].is_number_integer())
             throw ApiError(
                 400,
                 "'replica': the replica to move to is required, as an integer (GET /v1/replicas)",
                 "replica");
           const int64_t to = body["replica"].get<int64_t>();
           if (to < 0 || to >= static_cast<int64_t>(replicas_.size()))
             throw ApiError(400,
                            cat("'replica': ", to, " is not a replica of this server (0 to ",
                                replicas_.size() - 1, ")"),
                            "replica");
           send_json(res, 200, session_json(store_.move(id, static_cast<int>(to)), replicas_));
         }));
  h.Get("/v1/replicas", [this](const httplib::Request&, httplib::Response& res) {
    const std::vector<int64_t> placed = store_.placed_per_replica();
    json data = json::array();
    for (size_t r = 0; r < replicas_.size(); ++r)
      data.push_back({{"replica", r},
                      {"object", "replica"},
                      {"device", replicas_[r].device},
                      {"sessions", placed[r]},
                      {"requests_in_flight", in_flight_[r].load()}});
    send_json(res, 200, {{"object", "list"}, {"data", data}});
    metrics_.count_request("/v1/replicas", 200);
  });
}

}  // namespace ssm::serve
