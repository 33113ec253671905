// Clients that go away and a server that stops, on a real server:
// - a completion whose client closes its connection, streaming or not, is
//   cancelled within moments (not run to max_tokens), and its session then
//   holds exactly the prompt and the tokens generated until then;
// - SIGTERM while clients hold idle keep-alive connections: the request in
//   flight is answered and saved, and the server exits at once after it,
//   without waiting for the idle connections' keep-alive timeout (30 s).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A value of the server's /metrics, -1 if absent.
int64_t metric(const ServeProcess& server, const std::string& name) {
  const auto r = server.client()->Get("/metrics");
  if (!r) return -1;
  const std::string key = "\n" + name + " ";
  const size_t at = r->body.find(key);
  return at == std::string::npos ? -1 : std::stoll(r->body.substr(at + key.size()));
}

// Polls until pred() or the time is up; true if pred() held.
template <class Pred>
bool eventually(Pred pred, double seconds) {
  const auto t0 = Clock::now();
  while (seconds_since(t0) < seconds) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A raw connection that sends one POST and can then be closed unread.
int send_raw_post(int port, const std::string& path, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("cannot connect");
  const std::string req = cat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                              "Content-Length: ", body.size(), "\r\n\r\n", body);
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    throw std::runtime_error("cannot send");
  return fd;
}

// A long completion on session "gone" whose client closes its connection
// after the first tokens (a streaming client after reading its first event).
void client_leaves_mid_request(bool stream) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions");
  const std::vector<int64_t> prompt = {65, 110, 100, 32};
  constexpr int64_t kMax = 4000;
  const int fd = send_raw_post(server.port(), "/v1/completions",
                               json{{"prompt", prompt}, {"max_tokens", kMax}, {"temperature", 0},
                                    {"session", "gone"}, {"stream", stream}}.dump());
  if (stream) {
    char buf[256];
    ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0) << "no event came";
  }
  ASSERT_TRUE(eventually([&] { return metric(server, "ssm_generated_tokens_total") >= 5; }, 60))
      << "the request never started decoding";
  ::close(fd);
  const auto closed = Clock::now();
  ASSERT_TRUE(eventually([&] { return metric(server, "ssm_requests_cancelled_total") == 1; }, 30))
      << "the request was not cancelled; generated " << metric(server, "ssm_generated_tokens_total");
  const double cancel_seconds = seconds_since(closed);
  std::printf("%s: cancelled %.3f s after the client closed its connection\n", stream ? "streamed" : "not streamed",
              cancel_seconds);
  EXPECT_LT(cancel_seconds, 2.0);
  ASSERT_TRUE(eventually([&] { return metric(server, "ssm_requests_in_flight") == 0; }, 10));

  // The session holds the prompt and the k tokens generated (the last one
  // pending): continuing it equals one greedy generation over all of them.
  auto c = server.client();
  const Reply info = get(*c, "/v1/sessions/gone");
  ASSERT_EQ(info.status, 200) << info.raw;
  const int64_t tokens = info.body["tokens"].get<int64_t>();
  EXPECT_TRUE(info.body["pending_token"].get<bool>());
  const int64_t k = tokens - static_cast<int64_t>(prompt.size()) + 1;
  EXPECT_EQ(metric(server, "ssm_generated_tokens_total"), k);
  ASSERT_GT(k, 0);
  ASSERT_LT(k, kMax) << "the request ran to its end";
  std::vector<int64_t> all = prompt;
  const auto generated = generate_greedy(default_model(), prompt, k);
  all.insert(all.end(), generated.begin(), generated.end());
  const std::vector<int64_t> next = {84, 104, 101};
  all.insert(all.end(), next.begin(), next.end());
  const Reply more = post(*c, "/v1/completions",
                          json{{"prompt", next}, {"max_tokens", 6}, {"temperature", 0}, {"session", "gone"}});
  ASSERT_EQ(more.status, 200) << more.raw;
  EXPECT_EQ(completion_ids(more), generate_greedy(default_model(), all, 6));
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeDisconnect, NonStreamingRequestIsCancelledWhenItsClientLeaves) { client_leaves_mid_request(false); }

TEST(ServeDisconnect, StreamingRequestIsCancelledWhenItsClientLeaves) { client_leaves_mid_request(true); }

TEST(ServeShutdown, SigtermWithIdleKeepAliveConnectionsExitsAfterTheRequestInFlight) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions");
  // Three clients whose connections stay open, idle, after a request.
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(server.client());
    idle.back()->set_keep_alive(true);
    ASSERT_EQ(get(*idle.back(), "/health").status, 200);
  }
  // One request in flight.
  auto answered = std::make_shared<std::atomic<double>>(0);
  const auto t0 = Clock::now();
  auto fut = std::async(std::launch::async, [&] {
    auto c = server.client();
    const Reply r = post(*c, "/v1/completions",
                         json{{"prompt", "And"}, {"max_tokens", 2000}, {"temperature", 0}, {"session", "busy"}});
    *answered = seconds_since(t0);
    return r;
  });
  ASSERT_TRUE(eventually([&] { return metric(server, "ssm_generated_tokens_total") >= 1; }, 60));
  const double signalled = seconds_since(t0);
  const CliRun run = server.stop();
  const double exited = seconds_since(t0);
  const Reply r = fut.get();
  EXPECT_GT(*answered, signalled) << "the request was not in flight at the signal";
  EXPECT_EQ(run.code, 0) << run.err;
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 2000);
  EXPECT_TRUE(std::filesystem::exists(dir / "sessions" / "busy.state"));
  std::printf("request answered at %.2f s, server exited at %.2f s\n", answered->load(), exited);
  EXPECT_LT(exited - *answered, 3.0) << "the server waited on idle keep-alive connections";
}

TEST(ServeShutdown, SigtermWithOnlyIdleConnectionsExitsAtOnce) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions");
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(server.client());
    idle.back()->set_keep_alive(true);
    ASSERT_EQ(get(*idle.back(), "/v1/models").status, 200);
  }
  const auto t0 = Clock::now();
  const CliRun run = server.stop();
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_LT(seconds_since(t0), 3.0);
  // The idle clients find their connection closed, not a hung server.
  const auto late = idle[0]->Get("/health");
  EXPECT_TRUE(!late || late->status == 503);
}

}  // namespace
}  // namespace ssm::testing
