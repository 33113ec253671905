// A bounded load: 32 concurrent clients x 20 greedy requests on 16 sessions
// (two clients share each session, so their requests are serialised there in
// an order the server picks); half the clients stream (server-sent events),
// which times the phases of a request: time to the first token, the decode
// time per token after it, and the total. Every response must be complete; then the same
// requests are replayed one at a time, per session in the order the server
// served them (session_tokens tells it), on fresh sessions: each reply must
// be the same, so batching changed nothing. The replay is also the
// one-client-at-a-time baseline: aggregate tokens/s of both and p50/p99
// latency are printed; only that batching beat one at a time is asserted
// (the machine is shared, so no figure is).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <cstdlib>
#include <thread>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

constexpr int kClients = 32, kRequests = 20, kSessions = 16, kMaxTokens = 8;

struct Served {
  int client, index;
  std::string session, prompt;
  int64_t session_tokens;
  std::vector<int64_t> ids;
  double seconds;
  double first_token = -1;  // streamed: seconds to the first text event
};

// Whether an event so far carries text (not the empty text of the last one).
bool has_text(const std::string& events) {
  const std::string key = "\"text\":\"";
  for (size_t at = events.find(key); at != std::string::npos; at = events.find(key, at + 1))
    if (at + key.size() < events.size() && events[at + key.size()] != '"') return true;
  return false;
}

// A streamed completion: its reply (the events' last document holds the
// ids) and when the first event that carries text arrived.
Reply post_streamed(httplib::Client& c, const json& body, double& first_token) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string events;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    events.append(data, n);
    if (first_token < 0 && has_text(events))
      first_token = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
  };
  const auto r = c.send(req);
  if (!r) return {0, nullptr, "no response: " + httplib::to_string(r.error())};
  Reply out{r->status, nullptr, events};
  if (r->status != 200) return out;
  const auto docs = sse_events(events);
  if (docs.size() < 2 || docs.back() != "[DONE]") return out;
  out.body = docs[docs.size() - 2];
  return out;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// cpp-httplib 0.11 (compiled by Debian) listens with a backlog of 5; 32
// clients connecting at once overflowed it and some got no response. The
// server widens it: `ss` shows a listening socket's backlog as its Send-Q.
TEST(ServeLoad, ListenBacklogHoldsManyConnectingClients) {
  if (!std::filesystem::exists("/usr/bin/ss")) GTEST_SKIP() << "no `ss` (iproute2) here";
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions");
  const CliRun r = CliProcess({"-ltnH", cat("sport = :", server.port())}, "", "/usr/bin/ss").wait();
  std::istringstream line(r.out);
  std::string state;
  int64_t recv_q = -1, backlog = -1;
  line >> state >> recv_q >> backlog;
  EXPECT_GE(backlog, 64) << r.out;
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeLoad, ConcurrentClientsOnSharedSessionsMatchOneAtATime) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--max-batch", "16", "--max-queue", "64"});
  std::vector<std::vector<Served>> per_client(kClients);
  std::atomic<int> connection_failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      auto http = server.client();
      for (int i = 0; i < kRequests; ++i) {
        Served s{c, i, cat("load-", c % kSessions), cat(" c", c, "r", i, ":"), 0, {}, 0};
        const auto t = std::chrono::steady_clock::now();
        json body = {{"prompt", s.prompt}, {"max_tokens", kMaxTokens}, {"temperature", 0}, {"session", s.session}};
        const bool streamed = c % 2 == 0;
        if (streamed) body["stream"] = true;
        const Reply r = streamed ? post_streamed(*http, body, s.first_token) : post(*http, "/v1/completions", body);
        if (r.status == 0) ++connection_failures;  // no HTTP response at all: must not happen
        s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        if (r.status != 200 || !r.body.is_object()) {
          s.session_tokens = -r.status;
          s.prompt += " -> " + r.raw;
        } else {
          s.ids = completion_ids(r);
          s.session_tokens = r.body["ssm"]["session_tokens"].get<int64_t>();
        }
        per_client[c].push_back(s);
      }
    });
  for (auto& t : clients) t.join();
  const double concurrent_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string metrics_batched = server.client()->Get("/metrics")->body;

  EXPECT_EQ(connection_failures.load(), 0) << "requests that got no HTTP response";
  std::map<std::string, std::vector<Served>> by_session;
  std::vector<double> latencies, first_token, per_token;
  for (const auto& v : per_client)
    for (const Served& s : v) {
      if (s.client % 2 == 0) {
        ASSERT_GT(s.first_token, 0) << "client " << s.client << " request " << s.index << ": no text event";
        first_token.push_back(s.first_token);
        per_token.push_back((s.seconds - s.first_token) / (kMaxTokens - 1));
      }
      ASSERT_GT(s.session_tokens, 0) << "client " << s.client << " request " << s.index << ": status "
                                     << -s.session_tokens << " " << s.prompt;
      ASSERT_EQ(s.ids.size(), static_cast<size_t>(kMaxTokens)) << "incomplete response";
      by_session[s.session].push_back(s);
      latencies.push_back(s.seconds);
    }
  ASSERT_EQ(by_session.size(), static_cast<size_t>(kSessions));

  // The replay, one request at a time, on fresh sessions.
  auto http = server.client();
  const auto t1 = std::chrono::steady_clock::now();
  int64_t mismatches = 0;
  for (auto& [session, served] : by_session) {
    std::sort(served.begin(), served.end(),
              [](const Served& a, const Served& b) { return a.session_tokens < b.session_tokens; });
    for (const Served& s : served) {
      const Reply r = post(*http, "/v1/completions",
                           json{{"prompt", s.prompt}, {"max_tokens", kMaxTokens}, {"temperature", 0},
                                {"session", "replay-" + session}});
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_EQ(r.body["ssm"]["session_tokens"], s.session_tokens);
      mismatches += completion_ids(r) != s.ids;
    }
  }
  const double sequential_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_EQ(mismatches, 0);

  const double tokens = static_cast<double>(kClients * kRequests * kMaxTokens);
  std::printf("connection-level failures: %d\n", connection_failures.load());
  EXPECT_EQ(connection_failures.load(), 0);
  const std::string metrics = server.client()->Get("/metrics")->body;
  std::printf("load: %d clients x %d requests on %d sessions, max_tokens %d: %.0f tokens in %.2f s = %.0f tokens/s; "
              "latency p50 %.1f ms p99 %.1f ms\n"
              "one at a time: %.2f s = %.0f tokens/s; batched / sequential throughput: %.2fx\n",
              kClients, kRequests, kSessions, kMaxTokens, tokens, concurrent_seconds, tokens / concurrent_seconds,
              1e3 * percentile(latencies, 0.5), 1e3 * percentile(latencies, 0.99), sequential_seconds,
              tokens / sequential_seconds, sequential_seconds / concurrent_seconds);
  const auto value = [&](const std::string& name, const std::string& m) {
    const size_t at = m.find("\n" + name + " ") + name.size() + 2;
    return m.substr(at, m.find('\n', at) - at);
  };
  std::printf("phases (the %zu streamed requests): time to first token p50 %.1f ms p99 %.1f ms; "
              "decode per token after it p50 %.2f ms p99 %.2f ms; total p50 %.1f ms p99 %.1f ms\n",
              first_token.size(), 1e3 * percentile(first_token, 0.5), 1e3 * percentile(first_token, 0.99),
              1e3 * percentile(per_token, 0.5), 1e3 * percentile(per_token, 0.99),
              1e3 * percentile(latencies, 0.5), 1e3 * percentile(latencies, 0.99));
  const auto quantile = [&](const std::string& name, const char* q) {
    const std::string key = name + "{quantile=\"" + q + "\"} ";
    const size_t at = metrics_batched.find(key) + key.size();
    return 1e3 * std::stod(metrics_batched.substr(at, metrics_batched.find('\n', at) - at));
  };
  std::printf("server side (arrival to first token sampled, all requests of the batched phase): p50 %.1f ms p99 %.1f ms\n",
              quantile("ssm_time_to_first_token_seconds", "0.5"), quantile("ssm_time_to_first_token_seconds", "0.99"));
  const double steps = std::stod(value("ssm_decode_steps_total", metrics_batched)),
               rows = std::stod(value("ssm_decode_rows_total", metrics_batched));
  std::printf("batched phase: %.0f decode steps, %.0f rows decoded (mean batch %.2f); both phases: %s steps, %s rows\n",
              steps, rows, rows / steps, value("ssm_decode_steps_total", metrics).c_str(),
              value("ssm_decode_rows_total", metrics).c_str());
  // Batching happened: more than one row per decode step on average. What
  // it gained (batched against one at a time, 4x or more when measured) is
  // a figure printed above and recorded below, not asserted: speed on a
  // shared machine is measured, never a test's verdict.
  EXPECT_GT(rows / steps, 2.0) << "decode steps were hardly batched";
  ::testing::Test::RecordProperty("batched_tokens_per_s", std::to_string(tokens / concurrent_seconds));
  ::testing::Test::RecordProperty("sequential_tokens_per_s", std::to_string(tokens / sequential_seconds));
  EXPECT_EQ(server.stop().code, 0);
}

}  // namespace
}  // namespace ssm::testing
