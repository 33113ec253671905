// `ssm generate` end to end: greedy ids reproduce the reference's generation,
// a session continues across processes exactly as in one process, text is
// streamed as the tokens' bytes and stops before a stop string, and a bad
// session file is refused and left alone.
#include <gtest/gtest.h>

#include "ssm/ops/backend.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ssm/io/atomic_file.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/generator.h"
#include "support/backends.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::golden_dir;
using testing::TempDir;

struct CliRun {
  int code;
  std::string out, err;
};

// Runs `ssm ARGS` (ARGS already shell-quoted) capturing stdout and stderr.
CliRun ssm_cli(const std::string& args) {
  TempDir dir;
  const std::string cmd = cat("'", SSM_CLI_PATH, "' ", args, " >'", (dir / "out").string(), "' 2>'",
                              (dir / "err").string(), "'");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "out"), read_file(dir / "err")};
}

std::string join(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += cat(s.empty() ? "" : ",", id);
  return s;
}

std::vector<int64_t> golden_ids(const std::string& name, const std::string& key) {
  const Tensor t = SafetensorsFile::open(golden_dir(name) + "/golden.safetensors").get(key).clone();
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

bool loads(const std::string& name) {
  try {
    LanguageModel::load(golden_dir(name));
    return true;
  } catch (const Error&) {
    return false;
  }
}

class GenerateCli : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerateCli, GreedyIdsReproduceReference) {
  if (!loads(GetParam())) GTEST_SKIP() << GetParam() << " is not supported by this build yet";
  const auto prompt = golden_ids(GetParam(), "gen_prompt");
  const auto expected = golden_ids(GetParam(), "gen_output");
  for (const std::string& backend : testing::all_backends()) {  // host backends: GPU runs are labelled gpu
    const CliRun r = ssm_cli(cat("generate '", golden_dir(GetParam()), "' --prompt-ids ", join(prompt),
                              " --print-ids --temperature 0 --max-tokens ", expected.size() - prompt.size(),
                              " --threads 2 --backend ", backend));
    ASSERT_EQ(r.code, 0) << backend << ": " << r.err;
    EXPECT_EQ(r.out, join(expected) + "\n") << backend;
    EXPECT_NE(r.err.find("prefill: 7 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GenerateCli,
                         ::testing::Values("mamba2_hf_tiny", "mamba3_siso_tiny", "mamba3_mimo_tiny",
                                           "hybrid_tiny"),
                         [](const auto& info) { return info.param; });

TEST(GenerateCliSession, ContinuesAcrossProcessesAsInOne) {
  const std::string model_dir = golden_dir("mamba2_hf_tiny");
  TempDir dir;
  const std::string session = (dir / "chat.state").string();
  const std::vector<int64_t> a = {12, 99, 140, 3}, b = {77, 78};
  const std::string common = cat(" --print-ids --temperature 0 --max-tokens 6 --ignore-eos --session '", session, "'");
  const CliRun r1 = ssm_cli(cat("generate '", model_dir, "' --prompt-ids ", join(a), common));
  ASSERT_EQ(r1.code, 0) << r1.err;
  ASSERT_TRUE(fs::exists(session));
  const CliRun r2 = ssm_cli(cat("generate '", model_dir, "' --prompt-ids ", join(b), common));
  ASSERT_EQ(r2.code, 0) << r2.err;

  // The same two calls in one process.
  LanguageModel model = LanguageModel::load(model_dir);
  Context ctx(1);
  Generator gen(model, ctx);
  SessionState s = make_session(model, 1);
  const GenerationConfig cfg{.max_new_tokens = 6};
  auto g1 = a, g2 = b;
  const auto new1 = gen.generate(s, {a}, cfg)[0].tokens;
  const auto new2 = gen.generate(s, {b}, cfg)[0].tokens;
  g1.insert(g1.end(), new1.begin(), new1.end());
  g2.insert(g2.end(), new2.begin(), new2.end());
  EXPECT_EQ(r1.out, join(g1) + "\n");
  EXPECT_EQ(r2.out, join(g2) + "\n");
}

TEST(GenerateCliSession, BadSessionFileIsRefusedAndKept) {
  const std::string model_dir = golden_dir("mamba2_hf_tiny");
  TempDir dir;
  const fs::path session = dir / "chat.state";
  const std::string args = cat("generate '", model_dir, "' --prompt-ids 1,2,3 --max-tokens 3 --session '",
                               session.string(), "'");
  ASSERT_EQ(ssm_cli(args).code, 0);
  std::string bytes = read_file(session);
  bytes[bytes.size() / 2] ^= 1;
  testing::write_bytes(session, bytes);
  CliRun r = ssm_cli(args);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(session.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("corrupted"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(session), bytes);
  // A state from another model.
  const CliRun other = ssm_cli(cat("generate '", golden_dir("mamba2_hf_tiny"), "' --prompt-ids 1 --max-tokens 2 --session '",
                                (dir / "other.state").string(), "'"));
  ASSERT_EQ(other.code, 0);
  const std::string other_bytes = read_file(dir / "other.state");
  r = ssm_cli(cat("generate '", golden_dir("mamba2_ssm_tiny"), "' --prompt-ids 1 --session '",
                  (dir / "other.state").string(), "'"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("different model"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(dir / "other.state"), other_bytes);
}

TEST(GenerateCliText, StreamsTheTokensBytesAndStopsBeforeStopString) {
  // The golden models have no tokenizer.json: ids are bytes.
  const std::string base = cat("generate '", golden_dir("mamba2_hf_tiny"),
                               "' --prompt 'Hi there' --seed 11 --temperature 1.2 --top-k 0 --top-p 1 "
                               "--min-p 0 --max-tokens 16 --ignore-eos");
  const CliRun ids = ssm_cli(base + " --print-ids");
  const CliRun text = ssm_cli(base);
  ASSERT_EQ(ids.code, 0) << ids.err;
  ASSERT_EQ(text.code, 0) << text.err;
  std::vector<int64_t> all;
  std::stringstream ss(ids.out);
  for (std::string item; std::getline(ss, item, ',');) all.push_back(std::stoll(item));
  ASSERT_EQ(all.size(), 8u + 16u);
  std::string expected;
  for (size_t i = 8; i < all.size(); ++i) expected += static_cast<char>(all[i]);
  EXPECT_EQ(text.out, expected);
  EXPECT_EQ(ssm_cli(base).out, text.out);  // same seed, same text
  EXPECT_NE(ssm_cli(base + " --seed 12").out, text.out);

  // A stop string made of generated bytes 5..6 ends the text before it.
  const std::string stop = expected.substr(5, 2);
  if (stop.find('\'') != std::string::npos || stop.find('\0') != std::string::npos)
    GTEST_SKIP() << "stop string not shell-safe";
  const CliRun stopped = ssm_cli(cat(base, " --stop '", stop, "'"));
  ASSERT_EQ(stopped.code, 0) << stopped.err;
  const size_t at = expected.find(stop);
  EXPECT_EQ(stopped.out, expected.substr(0, at));
  EXPECT_NE(stopped.err.find("stopped by stop string"), std::string::npos) << stopped.err;
}

TEST(GenerateCliText, StreamedTextEqualsDecodingAllIds) {
  // A model directory with a byte-level BPE tokenizer: its first 256 ids
  // are single bytes, so random generation splits UTF-8 characters.
  TempDir dir;
  fs::copy_file(golden_dir("mamba2_hf_tiny") + "/config.json", dir / "config.json");
  fs::copy_file(golden_dir("mamba2_hf_tiny") + "/model.safetensors", dir / "model.safetensors");
  fs::copy_file(golden_dir("tokenizer") + "/tokenizer.json", dir / "tokenizer.json");
  const std::string base = cat("generate '", dir.path().string(),
                               "' --prompt-ids 120,200,33 --seed 5 --temperature 1.5 --top-k 0 --top-p 1 "
                               "--min-p 0 --max-tokens 40 --ignore-eos");
  const CliRun ids = ssm_cli(base + " --print-ids");
  const CliRun text = ssm_cli(base);
  ASSERT_EQ(ids.code, 0) << ids.err;
  ASSERT_EQ(text.code, 0) << text.err;
  ASSERT_FALSE(ids.out.empty());
  const std::string new_ids = ids.out.substr(11, ids.out.size() - 12);  // after "120,200,33,", before "\n"
  ASSERT_EQ(ids.out.substr(0, 11), "120,200,33,");
  const CliRun decoded = ssm_cli(cat("tokenize '", dir.path().string(), "' --decode --text ", new_ids));
  ASSERT_EQ(decoded.code, 0) << decoded.err;
  EXPECT_EQ(text.out + "\n", decoded.out);  // tokenize ends its line
}

TEST(GenerateCliText, UsageErrors) {
  EXPECT_NE(ssm_cli(cat("generate '", golden_dir("mamba2_hf_tiny"), "' --prompt-ids 1,x")).code, 0);
  EXPECT_NE(ssm_cli(cat("generate '", golden_dir("mamba2_hf_tiny"), "' --prompt-ids 1,999")).code, 0);
  const CliRun r = ssm_cli(cat("generate '", golden_dir("mamba2_hf_tiny"), "' --prompt-ids 1 --top-p 0"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("top-p"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ssm
