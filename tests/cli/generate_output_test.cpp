// What `ssm generate` prints, checked against the ids it generated: the text
// is exactly the new tokens' bytes (no newline of its own, no byte of a stop
// string), the stats line counts every token, prompts come from a file or
// stdin, --echo/--quiet/--json do what they say, and Ctrl-C saves the state
// reached so far.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "ssm/model/state_file.h"
#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::contains;
using testing::golden_dir;
using testing::run_ssm;

// The golden models are byte-level: token id = byte.
const std::string kModel = golden_dir("mamba2_hf_tiny");

std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> ids;
  std::stringstream ss(line);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoll(item));
  return ids;
}

std::string bytes_of(const std::vector<int64_t>& ids, size_t from = 0) {
  std::string s;
  for (size_t i = from; i < ids.size(); ++i) s += static_cast<char>(ids[i]);
  return s;
}

std::vector<std::string> sampling(const std::string& seed, const std::string& n) {
  return {"generate", kModel, "--seed", seed, "--temperature", "1.3", "--top-k", "0", "--top-p", "1",
          "--min-p", "0", "--max-tokens", n, "--ignore-eos", "--threads", "1"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(GenerateOutput, TextIsExactlyTheNewTokensBytes) {
  const auto args = sampling("3", "24") + std::vector<std::string>{"--prompt", "Hi there"};
  const testing::CliRun ids = run_ssm(args + std::vector<std::string>{"--print-ids"});
  const testing::CliRun text = run_ssm(args);
  ASSERT_EQ(ids.code, 0) << ids.err;
  ASSERT_EQ(text.code, 0) << text.err;
  const auto all = parse_ids(ids.out);
  ASSERT_EQ(all.size(), 8u + 24u);
  EXPECT_EQ(text.out, bytes_of(all, 8));  // and no newline the model did not generate

  // Into one file (2>&1) the stats line still starts a line of its own.
  testing::TempDir dir;
  std::string command = std::string("'") + SSM_CLI_PATH + "'";
  for (const std::string& a : args) command += " '" + a + "'";
  ASSERT_EQ(std::system((command + " >'" + (dir / "both").string() + "' 2>&1").c_str()), 0);
  const std::string both = testing::slurp_file(dir / "both");
  EXPECT_EQ(both.substr(0, text.out.size()), text.out);
  EXPECT_EQ(both.substr(text.out.size(), 10), text.out.back() == '\n' ? "prefill: 8" : "\nprefill: ");
}

TEST(GenerateOutput, SessionOverTwoRunsGainsNoNewline) {
  testing::TempDir dir;
  const auto run = [&](const std::string& session, const std::string& prompt, bool print_ids) {
    auto args = sampling("5", "7") + std::vector<std::string>{"--prompt", prompt, "--session", (dir / session).string()};
    if (print_ids) args.push_back("--print-ids");
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  const std::string text1 = run("text.state", "ab", false), text2 = run("text.state", "cd", false);
  const auto ids1 = parse_ids(run("ids.state", "ab", true)), ids2 = parse_ids(run("ids.state", "cd", true));
  EXPECT_EQ(text1 + text2, bytes_of(ids1, 2) + bytes_of(ids2, 2));
}

TEST(GenerateOutput, StopStringIsNeverPrinted) {
  const auto args = sampling("11", "40") + std::vector<std::string>{"--prompt", "Hi there"};
  const testing::CliRun ids = run_ssm(args + std::vector<std::string>{"--print-ids"});
  ASSERT_EQ(ids.code, 0) << ids.err;
  const std::string generated = bytes_of(parse_ids(ids.out), 8);
  int checked = 0;
  for (size_t length = 1; length <= 3; ++length)
    for (size_t at = 3; at + length <= generated.size(); at += 9) {
      const std::string stop = generated.substr(at, length);
      if (stop.find('\0') != std::string::npos) continue;
      const testing::CliRun r = run_ssm(args + std::vector<std::string>{"--stop", stop});
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, generated.substr(0, generated.find(stop))) << "stop of " << length << " bytes at " << at;
      EXPECT_TRUE(contains(r.err, "stopped by stop string")) << r.err;
      ++checked;
    }
  EXPECT_GE(checked, 9);
}

TEST(GenerateOutput, StatsLineCountsEveryGeneratedToken) {
  const testing::CliRun r = run_ssm({"generate", kModel, "--prompt-ids", "4,5,6", "-n", "5", "--ignore-eos",
                                     "--print-ids", "--temperature", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto ids = parse_ids(r.out);
  EXPECT_TRUE(contains(r.err, "prefill: 3 tokens")) << r.err;
  EXPECT_TRUE(contains(r.err, "generated: " + std::to_string(ids.size() - 3) + " tokens")) << r.err;
  EXPECT_EQ(ids.size() - 3, 5u);
}

TEST(GenerateOutput, SessionInAMissingDirectoryIsRefusedBeforeGenerating) {
  testing::TempDir dir;
  const std::string session = (dir / "no/such/dir/chat.state").string();
  const testing::CliRun r = run_ssm({"generate", kModel, "-p", "Hello", "-n", "50", "--session", session});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");  // nothing was generated
  EXPECT_TRUE(contains(r.err, "ssm: error: --session: " + session)) << r.err;
  EXPECT_TRUE(contains(r.err, "does not exist")) << r.err;
  EXPECT_FALSE(contains(r.err, "prefill")) << r.err;
}

TEST(GenerateOutput, PromptFromFileOrStandardInput) {
  testing::TempDir dir;
  const std::string prompt = "In the beginning\nwas the word";
  testing::write_bytes(dir / "prompt.txt", prompt);
  const auto args = sampling("8", "12");
  const testing::CliRun given = run_ssm(args + std::vector<std::string>{"-p", prompt, "--print-ids"});
  const testing::CliRun file = run_ssm(args + std::vector<std::string>{"-f", (dir / "prompt.txt").string(), "--print-ids"});
  const testing::CliRun in = run_ssm(args + std::vector<std::string>{"--file", "-", "--print-ids"}, prompt);
  ASSERT_EQ(given.code, 0) << given.err;
  EXPECT_EQ(bytes_of(parse_ids(given.out)).substr(0, prompt.size()), prompt);
  EXPECT_EQ(file.out, given.out) << file.err;
  EXPECT_EQ(in.out, given.out) << in.err;
  const testing::CliRun empty = run_ssm(args + std::vector<std::string>{"--file", "-"}, "");
  EXPECT_EQ(empty.code, 2);
  EXPECT_TRUE(contains(empty.err, "--file: the prompt is empty")) << empty.err;
}

TEST(GenerateOutput, EchoQuietAndJson) {
  const auto args = sampling("4", "10") + std::vector<std::string>{"-p", "Hello"};
  const testing::CliRun plain = run_ssm(args);
  ASSERT_EQ(plain.code, 0) << plain.err;
  const testing::CliRun echo = run_ssm(args + std::vector<std::string>{"--echo"});
  EXPECT_EQ(echo.out, "Hello" + plain.out);
  const testing::CliRun quiet = run_ssm(args + std::vector<std::string>{"--quiet"});
  EXPECT_EQ(quiet.out, plain.out);
  EXPECT_EQ(quiet.err, "");
  const testing::CliRun ids = run_ssm(args + std::vector<std::string>{"--print-ids"});
  const testing::CliRun json = run_ssm(args + std::vector<std::string>{"--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.err, "");  // the stats are in the document
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  auto all = doc["prompt_ids"].get<std::vector<int64_t>>();
  const auto generated = doc["ids"].get<std::vector<int64_t>>();
  all.insert(all.end(), generated.begin(), generated.end());
  EXPECT_EQ(all, parse_ids(ids.out));
  EXPECT_EQ(doc["generated"]["tokens"], generated.size());
  EXPECT_EQ(doc["prefill"]["tokens"], 5);
  EXPECT_EQ(doc["seed"], 4);
  EXPECT_EQ(doc["finish_reason"], "length");
  // JSON shows invalid UTF-8 replaced, so only ASCII text compares as is.
  if (std::all_of(plain.out.begin(), plain.out.end(), [](char c) { return (c & 0x80) == 0; })) {
    EXPECT_EQ(doc["text"], plain.out);
  }
}

// Waits (without a deadline on the result) until the process has printed
// something, so that the signal lands mid-generation.
void wait_for_output(testing::CliProcess& p) {
  for (int i = 0; i < 60000 && p.out().size() < 16 && !p.exited(); ++i) ::usleep(1000);
}

TEST(GenerateOutput, CtrlCSavesTheStateReachedAndPrintsTheStats) {
  testing::TempDir dir;
  const std::string session = (dir / "chat.state").string();
  const std::vector<int64_t> prompt = {12, 99, 140, 3};
  testing::CliProcess p({"generate", kModel, "--prompt-ids", "12,99,140,3", "--temperature", "0", "-n", "100000000",
                         "--ignore-eos", "--threads", "1", "--session", session});
  wait_for_output(p);
  ASSERT_FALSE(p.exited()) << "generation ended before the signal";
  p.signal(SIGINT);
  const testing::CliRun r = p.wait();
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_TRUE(contains(r.err, "stopped by interrupt")) << r.err;
  EXPECT_TRUE(contains(r.err, "the state reached is saved in " + session)) << r.err;
  // std::regex trips GCC 12's uninitialised-use warning under the sanitizers.
  const size_t at = r.err.find("generated: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const int64_t n = std::stoll(r.err.substr(at + 11));
  ASSERT_GT(n, 0);

  // The saved state is the one n greedy tokens reach in one process.
  LanguageModel model = LanguageModel::load(kModel);
  Context ctx(1);
  Generator gen(model, ctx);
  SessionState expected = make_session(model, 1);
  gen.generate(expected, {prompt}, GenerationConfig{.max_new_tokens = n});
  SessionState saved = load_state(session, model, ctx);
  EXPECT_EQ(saved.consumed, expected.consumed);
  EXPECT_EQ(saved.pending, expected.pending);
  EXPECT_EQ(saved.recent, expected.recent);
  for (size_t i = 0; i < saved.model.layers.size(); ++i) {
    const auto got = saved.model.layers[i]->tensors(), want = expected.model.layers[i]->tensors();
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < got.size(); ++t)
      EXPECT_EQ(testing::max_rel_error(*got[t].second, *want[t].second), 0.0) << "layer " << i << " " << got[t].first;
  }
  // And the conversation goes on from it.
  const testing::CliRun next =
      run_ssm({"generate", kModel, "--prompt-ids", "7", "-n", "3", "--ignore-eos", "--session", session});
  EXPECT_EQ(next.code, 0) << next.err;
}

}  // namespace
}  // namespace ssm
