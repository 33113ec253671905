// The official openai npm client (Node) against a real server: completion,
// streamed completion and chat completion; each must equal what the server
// gives a plain HTTP request for the same greedy input, and a bad request
// must reach the client as an APIError with the server's status. Skipped,
// saying why, where Node or the client is missing (scripts/install-node-deps.sh).
#include <gtest/gtest.h>

#include <cstdlib>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

const std::string kNodeDir = std::string(SSM_SOURCE_DIR) + "/tests/serve/node";

TEST(ServeOpenAIClient, CompletionStreamAndChat) {
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(kNodeDir + "/node_modules/openai/package.json"))
    GTEST_SKIP() << "the openai npm client is not installed: run scripts/install-node-deps.sh";
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--api-key", "test-key"});
  const CliRun run = CliProcess({"node", kNodeDir + "/openai_client.mjs", server.url() + "/v1", "default", "test-key"},
                                 "", "/usr/bin/env")
                          .wait();
  ASSERT_EQ(run.code, 0) << run.err;
  const json got = json::parse(run.out);
  auto c = server.client();
  const httplib::Headers auth = {{"Authorization", "Bearer test-key"}};
  const Reply plain = post(*c, "/v1/completions",
                           json{{"prompt", "And God said"}, {"max_tokens", 20}, {"temperature", 0}}.dump(), auth);
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_EQ(got["completion"], plain.body["choices"][0]["text"]);
  EXPECT_EQ(got["finish"], plain.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(got["usage"], plain.body["usage"]);
  EXPECT_EQ(got["streamed"], plain.body["choices"][0]["text"]);
  EXPECT_EQ(got["streamFinish"], plain.body["choices"][0]["finish_reason"]);
  // At least one text chunk and the final one. Not more: the text made
  // between two wakes of the stream goes out as one event, so a fast model
  // on a busy machine can finish all 20 tokens before the first send.
  EXPECT_GE(got["chunks"].get<int>(), 2);
  const Reply chat = post(*c, "/v1/chat/completions",
                          json{{"messages", {{{"role", "user"}, {"content", "Who made the light?"}}}},
                               {"max_tokens", 24}, {"temperature", 0}}.dump(), auth);
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(got["chat"], chat.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(got["chatRole"], "assistant");
  EXPECT_EQ(got["refused"]["status"], 400);
  EXPECT_TRUE(contains(got["refused"]["message"].get<std::string>(), "max_tokens")) << got["refused"];
  EXPECT_EQ(server.stop().code, 0);
}

}  // namespace
}  // namespace ssm::testing
