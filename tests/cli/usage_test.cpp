// The command line as a new user meets it: every mistake is one line
// "ssm: error: ..." naming the flag, with exit code 2; help and version work
// the ways people type them; every value option states its default.
#include <gtest/gtest.h>

#include "ssm/ops/backend.h"

#include <cblas.h>

#include <hwy/highway.h>
#include <cctype>
#include <sstream>
#include <thread>

#include "support/cli.h"
#include "support/usage_error.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::contains;
using testing::golden_dir;
using testing::expect_usage_error;
using testing::run_ssm;

const std::vector<std::string> kCommands = {"bench", "convert", "generate", "grad",  "help",     "info",
                                            "init",  "logits",  "score",    "serve", "tokenize", "train"};

TEST(CliUsage, Cli11ErrorsReadWellAndExitTwo) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  expect_usage_error({"bogus"}, "'bogus' is not a command");
  expect_usage_error({"generate", m, "-p", "hi", "--bogus", "3"}, "unknown option '--bogus'");
  expect_usage_error({"info", m, "extra"}, "unexpected argument 'extra'");
  expect_usage_error({"generate", m, "-p", "hi", "--threads", "abc"}, "--threads: 'abc' is not a whole number");
  expect_usage_error({"generate", m, "-p", "hi", "--max-tokens", "-1"}, "--max-tokens: -1 is out of range");
  expect_usage_error({"generate", m, "-p", "hi", "-n", "3", "--max-tokens", "4"}, "--max-tokens given 2 times");
  expect_usage_error({"generate", m, "-p"}, "--prompt needs a value");
  expect_usage_error({"generate", m, "-p", "hi", "--prompt-ids", "1"}, "--prompt and --prompt-ids");
  expect_usage_error({"train", m, "--out", "/tmp/x"}, "--data is required");
  expect_usage_error({"train", "--data", m + "/config.json", "--out", "/tmp/x"}, "MODEL is required");
  expect_usage_error({"info", "--jsn"}, "unknown option '--jsn'");  // the cause, not what follows from it
  expect_usage_error({"help", "bogus"}, "'bogus' is not a command");
  // No message may carry CLI11's numeric ranges or its own wording.
  const testing::CliRun r = run_ssm({"generate", m, "-p", "hi", "--max-tokens", "-1"});
  EXPECT_LT(r.err.size(), 120u) << r.err;
}

TEST(CliUsage, NoCommandPrintsHelpAndExitsTwo) {
  const testing::CliRun r = run_ssm({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "generate")) << r.err;
  EXPECT_TRUE(contains(r.err, "ssm: error: no command given")) << r.err;
}

TEST(CliUsage, BadValuesAreRefusedNamingTheFlag) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  testing::TempDir tmp;
  const std::vector<std::string> gen = {"generate", m, "--prompt-ids", "1,2"};
  const auto with = [](std::vector<std::string> base, std::initializer_list<std::string> more) {
    base.insert(base.end(), more);
    return base;
  };
  expect_usage_error(with(gen, {"--temperature", "-1"}), "--temperature");
  expect_usage_error(with(gen, {"--temperature", "nan"}), "--temperature");
  expect_usage_error(with(gen, {"--seed", "99999999999999999999"}), "--seed");
  expect_usage_error(with(gen, {"--seed", "-5"}), "--seed");
  expect_usage_error(with(gen, {"--stop-id", "-3"}), "--stop-id");
  expect_usage_error(with(gen, {"--stop-id", "99999"}), "--stop-id 99999");
  expect_usage_error(with(gen, {"--stop", ""}), "--stop");
  expect_usage_error(with(gen, {"--top-p", "0"}), "--top-p");
  expect_usage_error(with(gen, {"--threads", "0"}), "--threads");
  expect_usage_error(with(gen, {"--threads", "2.5"}), "--threads");
  std::string built_in;
  for (const std::string& b : backend_names()) built_in += (built_in.empty() ? "" : ", ") + b;
  expect_usage_error(with(gen, {"--backend", "tpu"}),
                     "--backend: 'tpu' is not one of this build's choices: " + built_in);
  expect_usage_error(with(gen, {"--max-memory", "lots"}), "--max-memory");
  expect_usage_error(with(gen, {"--prompt-ids", "1,x"}), "--prompt-ids");  // repeated, and a bad id
  expect_usage_error({"generate", m, "--prompt-ids", "1,999"}, "--prompt-ids: token id 999");
  // Attention caches grow with every token: a run that cannot fit them is refused before it starts.
  expect_usage_error({"generate", golden_dir("hybrid_tiny"), "--prompt-ids", "1", "-n", "99999999999"},
                     "--max-tokens 99999999999: the attention caches would need");
  expect_usage_error({"init", "--config", m + "/config.json", "--out", (tmp / "m").string(), "--seed", "-1"},
                     "--seed");
  expect_usage_error({"score", m, "--data", m + "/config.json", "--max-tokens", "-5"}, "--max-tokens");
  const std::vector<std::string> train = {"train", m, "--data", m + "/config.json", "--out", (tmp / "t").string()};
  expect_usage_error(with(train, {"--eval-tokens", "0"}), "--eval-tokens");
  expect_usage_error(with(train, {"--eval-tokens", "-1"}), "--eval-tokens");
  expect_usage_error(with(train, {"--eval-tokens", "10", "--seq-len", "64"}), "--eval-tokens 10");
  expect_usage_error(with(train, {"--checkpoint-every", "-1"}), "--checkpoint-every");
  expect_usage_error(with(train, {"--stop-at", "-1"}), "--stop-at");
  expect_usage_error(with(train, {"--stop-at", "20", "--steps", "10"}), "--stop-at 20");
  expect_usage_error(with(train, {"--lr", "0"}), "--lr");
  expect_usage_error(with(train, {"--steps", "0"}), "--steps");
  EXPECT_FALSE(std::filesystem::exists(tmp / "t"));
}

TEST(CliUsage, PathsThatAreNotWhatTheFlagWants) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  testing::TempDir tmp;
  expect_usage_error({"generate", m, "-p", "hi", "--session", tmp.path().string()}, "--session: ");
  expect_usage_error({"generate", m, "-p", "hi", "--session", tmp.path().string()}, "is a directory");
  expect_usage_error({"score", m, "--data", tmp.path().string()}, "--data: ");
  expect_usage_error({"score", m, "--data", (tmp / "missing.txt").string()}, "no such file");
  expect_usage_error({"init", "--config", tmp.path().string(), "--out", (tmp / "o").string()}, "is a directory");
  expect_usage_error({"info", (tmp / "absent").string()}, "no such directory");
  expect_usage_error({"info", m + "/config.json"}, "is a file");
  expect_usage_error({"info", tmp.path().string()}, "holds no config.json");
  expect_usage_error({"generate", m, "-f", (tmp / "absent.txt").string()}, "--file: ");
  expect_usage_error({"generate", m, "-p", ""}, "--prompt: the prompt is empty");
  expect_usage_error({"generate", m}, "no prompt");
}

TEST(CliUsage, VersionNamesTheBuild) {
  const testing::CliRun r = run_ssm({"--version"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ssm 0.", 0), 0u) << r.out;
  EXPECT_TRUE(contains(r.out, "compiler:")) << r.out;
  // The same answers the libraries give this process: the kernels run the
  // best target that was compiled and that this CPU supports.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  ASSERT_NE(usable, 0);
  EXPECT_TRUE(contains(r.out, std::string(hwy::TargetName(usable & -usable)) + " in use")) << r.out;
  EXPECT_TRUE(contains(r.out, openblas_get_config())) << r.out;
  EXPECT_TRUE(contains(r.out, "cuda:        off")) << r.out;
}

TEST(CliUsage, HelpCommandEqualsHelpFlag) {
  const testing::CliRun all = run_ssm({"help"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, run_ssm({"--help"}).out);
  for (const std::string& cmd : kCommands) {
    const testing::CliRun help = run_ssm({"help", cmd});
    ASSERT_EQ(help.code, 0) << cmd << ": " << help.err;
    EXPECT_EQ(help.out, run_ssm({cmd, "--help"}).out) << cmd;
    EXPECT_TRUE(contains(all.out, cmd)) << cmd;
  }
}

// Each option line of a command's --help: "  -t,--threads N   description".
std::vector<std::string> option_lines(const std::string& help) {
  std::vector<std::string> lines;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  -", 0) == 0) lines.push_back(line);
  return lines;
}

// "  -x,--flag NAME ..." : the flag takes a value (an upper-case type name
// follows it).
bool takes_value(const std::string& line) {
  const size_t space = line.find(' ', 3);
  return space != std::string::npos && space + 1 < line.size() &&
         std::isupper(static_cast<unsigned char>(line[space + 1]));
}

TEST(CliUsage, EveryValueOptionStatesItsDefault) {
  for (const std::string& cmd : kCommands)
    for (const std::string& line : option_lines(run_ssm({cmd, "--help"}).out)) {
      if (!takes_value(line)) continue;
      EXPECT_TRUE(contains(line, "(default: ") || contains(line, "(required")) << cmd << ": " << line;
    }
}

TEST(CliUsage, OneThreadsDefaultForEveryComputingCommand) {
  const std::string expected =
      std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  int computing = 0;
  for (const std::string& cmd : kCommands)
    for (const std::string& line : option_lines(run_ssm({cmd, "--help"}).out)) {
      if (line.rfind("  -t,--threads N", 0) != 0) continue;
      ++computing;
      EXPECT_TRUE(contains(line, "(default: all cores, " + expected + ")")) << cmd << ": " << line;
    }
  EXPECT_EQ(computing, 7);  // bench (a list), generate, grad, logits, score, serve, train
}

TEST(CliUsage, ShortAliasesAreTheLongFlags) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  const testing::CliRun s =
      run_ssm({"generate", "-m", m, "-p", "Hi", "-n", "6", "-t", "1", "-s", "9", "--print-ids", "--ignore-eos"});
  const testing::CliRun l = run_ssm({"generate", "--model", m, "--prompt", "Hi", "--max-tokens", "6", "--threads",
                                     "1", "--seed", "9", "--print-ids", "--ignore-eos"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out, l.out);
  EXPECT_EQ(std::count(s.out.begin(), s.out.end(), ','), 2 + 6 - 1) << s.out;
  EXPECT_TRUE(contains(s.err, "seed 9")) << s.err;
}

}  // namespace
}  // namespace ssm
