// Request parsing and the streamed text, in process: each field's type and
// range, session ids that could name another path, stop strings split
// across tokens and half UTF-8 characters held back.
#include <gtest/gtest.h>

#include "ssm/serve/api_error.h"
#include "ssm/serve/request.h"
#include "ssm/serve/text_stream.h"

namespace ssm::serve {
namespace {

using nlohmann::json;

RequestLimits limits() { return RequestLimits{.vocab_size = 100, .max_tokens = 50, .default_max_tokens = 7}; }

int status_of(const json& body, bool chat = false) {
  try {
    parse_completion_request(body, chat, limits());
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

TEST(ServeRequest, ReadsEveryField) {
  const auto r = parse_completion_request(
      json::parse(R"({"model":"m","prompt":[1,2,99],"max_tokens":5,"temperature":0.5,"top_p":0.9,
                      "stop":["a","bc"],"seed":3,"stream":true,"session":"s-1.x","n":1})"),
      false, limits());
  EXPECT_EQ(r.prompt_ids, (std::vector<int64_t>{1, 2, 99}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(*r.seed, 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.session, "s-1.x");
  EXPECT_EQ(parse_completion_request(json{{"prompt", "hi"}}, false, limits()).max_tokens, 7);
  EXPECT_EQ(*parse_completion_request(json{{"prompt", {"hi"}}}, false, limits()).prompt_text, "hi");
}

TEST(ServeRequest, RefusesBadValuesWith400) {
  for (const char* body :
       {R"([1,2])", R"({"prompt":5})", R"({"prompt":[1,100]})", R"({"prompt":[-1]})", R"({"prompt":[1.5]})",
        R"({"prompt":["a","b"]})", R"({"prompt":"x","max_tokens":-1})", R"({"prompt":"x","max_tokens":51})",
        R"({"prompt":"x","max_tokens":"5"})", R"({"prompt":"x","temperature":2.5})",
        R"({"prompt":"x","temperature":-0.1})", R"({"prompt":"x","top_p":0})", R"({"prompt":"x","n":2})",
        R"({"prompt":"x","stop":""})", R"({"prompt":"x","stop":["a",1]})", R"({"prompt":"x","stop":["a","b","c","d","e"]})",
        R"({"prompt":"x","stream":"yes"})", R"({"prompt":"x","seed":"1"})", R"({"prompt":"x","session":"../etc"})",
        R"({"prompt":"x","session":""})", R"({"prompt":"x","session":7})", R"({"prompt":"x","bogus":1})",
        R"({"prompt":"x","logprobs":5})", R"({"prompt":"x","echo":true})", R"({})",
        R"({"prompt":[18446744073709551615]})"})
    EXPECT_EQ(status_of(json::parse(body)), 400) << body;
  EXPECT_EQ(status_of(json::parse(R"({"messages":[]})"), true), 400);
  EXPECT_EQ(status_of(json::parse(R"({"messages":[{"role":"robot","content":"x"}]})"), true), 400);
  EXPECT_EQ(status_of(json::parse(R"({"messages":[{"role":"user","content":3}]})"), true), 400);
  EXPECT_EQ(status_of(json::parse(R"({"prompt":"x"})"), true), 400);  // chat has no prompt
  EXPECT_EQ(status_of(json::parse(R"({"prompt":"x","logprobs":null,"presence_penalty":0,"user":"u"})")), 200);
}

TEST(ServeRequest, SessionIdsAreFileNames) {
  for (const std::string& id : std::vector<std::string>{"a", "A9", "x_y-z.1", std::string(128, 'q')}) EXPECT_NO_THROW(check_session_id(id));
  for (const std::string& id : std::vector<std::string>{"", ".", "..", ".hidden", "a/b", "../a", "a\\b", "-a", "a b", "a\n",
                               std::string(129, 'q'), std::string("a\0b", 3)})
    EXPECT_THROW(check_session_id(id), ApiError) << id;
}

TEST(ServeRequest, ChatTemplate) {
  EXPECT_EQ(render_chat({{"system", "Be brief."}, {"user", "Hi"}}), "system: Be brief.\nuser: Hi\nassistant:");
}

TEST(ServeTextStream, StopStringAcrossTokensIsNeverSent) {
  TextStream t({"END"});
  std::string sent;
  for (const char* piece : {"ab", "cE", "N", "D", "zz"}) {
    const bool stop = t.push(piece);
    sent += t.take_ready();
    if (stop) break;
  }
  sent += t.take_rest();
  EXPECT_EQ(sent, "abc");
  EXPECT_EQ(t.text(), "abc");
}

TEST(ServeTextStream, HoldsBackAPossibleStopPrefixAndHalfCharacters) {
  TextStream t({"xy"});
  t.push("abx");
  EXPECT_EQ(t.take_ready(), "ab");  // "x" may start "xy"
  t.push("z\xC3");
  EXPECT_EQ(t.take_ready(), "xz");  // half of U+00E9
  t.push("\xA9");
  EXPECT_EQ(t.take_ready(), "\xC3\xA9");
  EXPECT_EQ(t.take_rest(), "");
  EXPECT_EQ(json_text("a\xFF"), "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ssm::serve
