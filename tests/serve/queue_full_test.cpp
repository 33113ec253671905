// The bounded queue: with --max-queue 1, a second completion while one is in
// flight gets 429 with OpenAI's rate-limit error at once, and once the first
// is answered the server takes requests again.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

int64_t in_flight(const ServeProcess& server) {
  const std::string m = server.client()->Get("/metrics")->body;
  const std::string name = "\nssm_requests_in_flight ";
  const size_t at = m.find(name);
  return at == std::string::npos ? -1 : std::stoll(m.substr(at + name.size()));
}

TEST(ServeQueue, FullQueueAnswers429AndRecovers) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--max-queue", "1"});
  Reply first;
  std::thread busy([&] {
    auto http = server.client();
    first = post(*http, "/v1/completions", json{{"prompt", "a long one"}, {"max_tokens", 3000}, {"temperature", 0}});
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (in_flight(server) < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(in_flight(server), 1) << "the first request never came in flight";
  auto http = server.client();
  const Reply refused = post(*http, "/v1/completions", json{{"prompt", "b"}, {"max_tokens", 2}});
  EXPECT_EQ(refused.status, 429) << refused.raw;
  EXPECT_EQ(refused.body["error"]["type"], "rate_limit_error") << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "queue_full") << refused.raw;
  busy.join();
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(in_flight(server), 0);
  const Reply after = post(*http, "/v1/completions", json{{"prompt", "b"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(after.status, 200) << after.raw;
  EXPECT_EQ(completion_ids(after).size(), 2u);
  EXPECT_EQ(server.stop().code, 0);
}

}  // namespace
}  // namespace ssm::testing
