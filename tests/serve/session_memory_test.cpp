// --max-sessions-memory on a real server: with room for 2 states, 5
// sessions keep at most 2 in memory and all 5 on disk; a session evicted and
// read back from its file continues exactly (its second request equals one
// greedy generation over everything it was given and gave).
#include <gtest/gtest.h>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

int64_t metric(const ServeProcess& server, const std::string& name) {
  const std::string m = server.client()->Get("/metrics")->body;
  const std::string key = "\n" + name + " ";
  const size_t at = m.find(key);
  return at == std::string::npos ? -1 : std::stoll(m.substr(at + key.size()));
}

TEST(ServeSessions, LeastRecentlyUsedLeaveMemoryAndComeBackFromDisk) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--max-sessions-memory", "2"});
  auto c = server.client();
  const std::vector<std::vector<int64_t>> prompts = {{65, 110}, {100, 32, 7}, {3, 17}, {84, 104, 101}, {10}};
  std::vector<std::vector<int64_t>> first;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Reply r = post(*c, "/v1/completions",
                         json{{"prompt", prompts[i]}, {"max_tokens", 5}, {"temperature", 0}, {"session", cat("m", i)}});
    ASSERT_EQ(r.status, 200) << r.raw;
    first.push_back(completion_ids(r));
    EXPECT_LE(metric(server, "ssm_sessions_in_memory"), 2) << "after session " << i;
  }
  EXPECT_EQ(metric(server, "ssm_sessions_on_disk"), 5);
  // m0 was the least recently used: gone from memory, read back from its file.
  const std::vector<int64_t> more = {42, 43};
  const Reply r = post(*c, "/v1/completions",
                       json{{"prompt", more}, {"max_tokens", 6}, {"temperature", 0}, {"session", "m0"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  std::vector<int64_t> all = prompts[0];
  all.insert(all.end(), first[0].begin(), first[0].end());
  all.insert(all.end(), more.begin(), more.end());
  EXPECT_EQ(completion_ids(r), generate_greedy(default_model(), all, 6));
  EXPECT_LE(metric(server, "ssm_sessions_in_memory"), 2);
  EXPECT_EQ(server.stop().code, 0);
}

}  // namespace
}  // namespace ssm::testing
