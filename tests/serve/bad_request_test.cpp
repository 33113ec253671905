// Every bad request gets OpenAI's JSON error with its 4xx status, and the
// server goes on serving: the table below is printed as the test runs (the
// README's table comes from it). Then authentication with --api-key.
#include <gtest/gtest.h>

#include <cstdio>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

struct BadCase {
  const char* what;
  const char* method;
  const char* path;
  std::string body;
  int status;
  const char* message;  // a part of error.message
};

std::vector<BadCase> bad_cases() {
  const std::string big(5000, 'x');
  return {
      {"malformed JSON", "POST", "/v1/completions", "{\"prompt\": ", 400, "invalid JSON"},
      {"body not an object", "POST", "/v1/completions", "[1,2]", 400, "must be a JSON object"},
      {"missing prompt", "POST", "/v1/completions", "{}", 400, "'prompt': is required"},
      {"prompt a number", "POST", "/v1/completions", R"({"prompt":5})", 400, "expected a string or an array"},
      {"token id out of vocabulary", "POST", "/v1/completions", R"({"prompt":[1,256]})", 400, "outside the vocabulary"},
      {"negative token id", "POST", "/v1/completions", R"({"prompt":[-3]})", 400, "outside the vocabulary"},
      {"several prompts", "POST", "/v1/completions", R"({"prompt":["a","b"]})", 400, "several prompts"},
      {"empty prompt, new session", "POST", "/v1/completions", R"({"prompt":""})", 400, "the prompt is empty"},
      {"max_tokens a string", "POST", "/v1/completions", R"({"prompt":"a","max_tokens":"9"})", 400, "expected an integer"},
      {"max_tokens negative", "POST", "/v1/completions", R"({"prompt":"a","max_tokens":-1})", 400, "out of range"},
      {"max_tokens over the limit", "POST", "/v1/completions", R"({"prompt":"a","max_tokens":100000})", 400, "out of range"},
      {"temperature above 2", "POST", "/v1/completions", R"({"prompt":"a","temperature":3})", 400, "out of range"},
      {"top_p 0", "POST", "/v1/completions", R"({"prompt":"a","top_p":0})", 400, "out of range"},
      {"n = 2", "POST", "/v1/completions", R"({"prompt":"a","n":2})", 400, "only n = 1"},
      {"stop not strings", "POST", "/v1/completions", R"({"prompt":"a","stop":[1]})", 400, "expected strings"},
      {"stream not a boolean", "POST", "/v1/completions", R"({"prompt":"a","stream":1})", 400, "expected a boolean"},
      {"unknown field", "POST", "/v1/completions", R"({"prompt":"a","tempreature":1})", 400, "unknown field"},
      {"unsupported field value", "POST", "/v1/completions", R"({"prompt":"a","logprobs":3})", 400, "not supported"},
      {"unknown model", "POST", "/v1/completions", R"({"prompt":"a","model":"gpt-4"})", 404, "does not exist"},
      {"session path traversal", "POST", "/v1/completions", R"({"prompt":"a","session":"../../etc/passwd"})", 400,
       "only letters, digits"},
      {"session dot file", "POST", "/v1/completions", R"({"prompt":"a","session":".x"})", 400, "starts with a letter"},
      {"session not a string", "POST", "/v1/completions", R"({"prompt":"a","session":1})", 400, "expected a string"},
      {"prompt too long", "POST", "/v1/completions", "{\"prompt\":\"" + std::string(700, 'a') + "\"}", 400,
       "more than the limit"},
      {"body too large", "POST", "/v1/completions", "{\"prompt\":\"" + big + "\"}", 413, "too large"},
      {"chat without messages", "POST", "/v1/chat/completions", R"({"prompt":"a"})", 400, "unknown field"},
      {"chat bad role", "POST", "/v1/chat/completions", R"({"messages":[{"role":"x","content":"a"}]})", 400,
       "is not one of"},
      {"chat content not a string", "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":[]}]})",
       400, "expected a string"},
      {"unknown session", "GET", "/v1/sessions/nobody", "", 404, "no session"},
      {"bad session id in path", "GET", "/v1/sessions/.hidden", "", 400, "starts with a letter"},
      {"fork without id", "POST", "/v1/sessions/nobody/fork", "{}", 400, "'id'"},
      {"fork of unknown session", "POST", "/v1/sessions/nobody/fork", R"({"id":"b"})", 404, "no session"},
      {"unknown route", "GET", "/v1/nothing", "", 404, "no route"},
      {"GET on a POST route", "GET", "/v1/completions", "", 404, "no route GET"},
      {"empty body", "POST", "/v1/completions", "", 400, "invalid JSON"},
      {"body not UTF-8", "POST", "/v1/completions", "{\"prompt\":\"\xff\"}", 400, "invalid JSON"},
      {"max_tokens a fraction", "POST", "/v1/completions", R"({"prompt":"a","max_tokens":1.5})", 400,
       "expected an integer"},
      {"max_tokens beyond int64", "POST", "/v1/completions", R"({"prompt":"a","max_tokens":99999999999999999999999})",
       400, "expected an integer"},
      {"temperature a string", "POST", "/v1/completions", R"({"prompt":"a","temperature":"hot"})", 400,
       "expected a number"},
      {"temperature negative", "POST", "/v1/completions", R"({"prompt":"a","temperature":-0.5})", 400, "out of range"},
      {"token id a fraction", "POST", "/v1/completions", R"({"prompt":[1.5]})", 400, "not a token id"},
      {"prompt null", "POST", "/v1/completions", R"({"prompt":null})", 400, "expected a string or an array"},
      {"five stop strings", "POST", "/v1/completions", R"({"prompt":"a","stop":["a","b","c","d","e"]})", 400,
       "at most 4"},
      {"empty stop string", "POST", "/v1/completions", R"({"prompt":"a","stop":""})", 400, "is empty"},
      {"session id empty", "POST", "/v1/completions", R"({"prompt":"a","session":""})", 400, "1 to 128 characters"},
      {"session id of 129 characters", "POST", "/v1/completions",
       "{\"prompt\":\"a\",\"session\":\"" + std::string(129, 's') + "\"}", 400, "1 to 128 characters"},
      {"session id with a slash", "POST", "/v1/completions", R"({"prompt":"a","session":"a/b"})", 400,
       "only letters, digits"},
      {"chat messages empty", "POST", "/v1/chat/completions", R"({"messages":[]})", 400, "the array is empty"},
      {"chat message without role", "POST", "/v1/chat/completions", R"({"messages":[{"content":"a"}]})", 400,
       "role"},
      {"fork to a bad id", "POST", "/v1/sessions/nobody/fork", R"({"id":"../x"})", 400, "only letters, digits"},
      {"fork with an unknown field", "POST", "/v1/sessions/nobody/fork", R"({"id":"x","y":1})", 400,
       "unknown field"},
      {"delete of unknown session", "DELETE", "/v1/sessions/nobody", "", 404, "no session"},
  };
}

TEST(ServeBadRequests, EachGetsItsStatusAndOpenAIError) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--max-body", "4096", "--max-prompt-tokens", "600"});
  auto c = server.client();
  std::printf("| request | status | error.message |\n|---|---|---|\n");
  for (const BadCase& k : bad_cases()) {
    const std::string method = k.method;
    const auto res = method == "GET"      ? c->Get(k.path)
                     : method == "DELETE" ? c->Delete(k.path)
                                          : c->Post(k.path, k.body, "application/json");
    ASSERT_TRUE(res) << k.what << ": no response (the server died?)";
    const json body = json::parse(res->body, nullptr, false);
    EXPECT_EQ(res->status, k.status) << k.what << ": " << res->body;
    ASSERT_TRUE(body.is_object() && body.contains("error")) << k.what << ": " << res->body;
    const std::string message = body["error"]["message"].get<std::string>();
    EXPECT_TRUE(contains(message, k.message)) << k.what << ": " << message;
    EXPECT_TRUE(body["error"].contains("type") && body["error"].contains("param") && body["error"].contains("code"));
    std::printf("| %s | %d | %s |\n", k.what, res->status, message.substr(0, 110).c_str());
  }
  // Still serving, and no file escaped the sessions directory.
  EXPECT_EQ(post(*c, "/v1/completions", json{{"prompt", "a"}, {"max_tokens", 2}}).status, 200);
  EXPECT_FALSE(std::filesystem::exists(dir / "etc"));
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeAuth, ApiKeyIsRequiredAndChecked) {
  TempDir dir;
  ServeProcess server(default_model(), dir / "sessions", {"--api-key", "sekret"});
  auto c = server.client();
  const json req = {{"prompt", "a"}, {"max_tokens", 2}};
  const Reply none = post(*c, "/v1/completions", req.dump());
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["type"], "authentication_error");
  EXPECT_EQ(post(*c, "/v1/completions", req.dump(), {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(*c, "/v1/completions", req.dump(), {{"Authorization", "sekret"}}).status, 401);
  EXPECT_EQ(get(*c, "/v1/models").status, 401);
  EXPECT_EQ(get(*c, "/metrics").status, 401);
  EXPECT_EQ(get(*c, "/health").status, 200);  // for load balancers
  EXPECT_EQ(post(*c, "/v1/completions", req.dump(), {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(get(*c, "/v1/models", {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeCli, BadFlagsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"serve", "--port", "-1"}, {"serve", "--port", "70000"}, {"serve", "--port", "x"},
        {"serve", "--max-batch", "0"}, {"serve", "--max-queue", "0"}, {"serve", "--api-key", ""},
        {"serve", "/no/such/model"}, {"serve", "--max-body", "1"},
        {"serve", "--default-max-tokens", "10", "--max-tokens-limit", "5"}, {"serve", "--prefill-chunk", "0"},
        {"serve", "--prefill-chunk", "-5"}, {"serve", "--max-sessions-memory", "0"}, {"serve", "--sessions", ""},
        {"serve", "--port", "1", "--port", "2"}}) {
    const CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 2) << args[1] << " " << (args.size() > 2 ? args[2] : "") << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error:")) << r.err;
  }
  // An empty model name used to be taken (and the server started): killed
  // by the test if it starts.
  TempDir names;
  const CliRun unnamed = run_ssm_expecting_exit(
      {"serve", "--model-name", "", "--port", "0", "--sessions", (names / "s").string()});
  EXPECT_EQ(unnamed.code, 2) << unnamed.err;
  EXPECT_TRUE(contains(unnamed.err, "ssm: error: --model-name: the name is empty")) << unnamed.err;
  // A sessions directory that cannot be made: a run failure naming it.
  const CliRun bad_dir = run_ssm({"serve", "--sessions", "/proc/nope/x"});
  EXPECT_EQ(bad_dir.code, 1) << bad_dir.err;
  EXPECT_TRUE(contains(bad_dir.err, "/proc/nope/x: cannot create the sessions directory")) << bad_dir.err;
  // A port another server holds: a run failure naming the address.
  TempDir dir;
  ServeProcess first(default_model(), dir / "a");
  const CliRun r = run_ssm({"serve", default_model(), "--port", std::to_string(first.port()), "--sessions",
                            (dir / "b").string()});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot listen on 127.0.0.1:" + std::to_string(first.port()))) << r.err;
}

}  // namespace
}  // namespace ssm::testing
