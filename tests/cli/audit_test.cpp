// What an audit of every command as a new user found, kept as tests: an
// empty path is refused naming the flag (it used to pass as "the current
// directory" or fail late with a message naming no path), an output that
// cannot be written fails naming it and leaves no file, and prompt bytes
// that are not UTF-8 are encoded byte by byte, never refused or crashed on.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::contains;
using testing::golden_dir;
using testing::run_ssm;

std::string shown(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += (a.empty() ? "''" : a) + " ";
  return s;
}

TEST(CliAudit, EmptyPathsAreUsageErrorsNamingTheFlag) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  const std::string ids = golden_dir("mamba2_ssm_tiny") + "/golden.safetensors";
  testing::TempDir tmp;
  const std::string text = (tmp / "t.txt").string();
  testing::write_bytes(text, "some text to read");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"generate", m, "-p", "hi", "--session", ""}, "--session: the path is empty"},
      {{"generate", m, "-f", ""}, "--file: the path is empty"},
      {{"generate", "", "-p", "hi"}, "MODEL: the path is empty"},
      {{"generate", "-m", "", "-p", "hi"}, "--model: the path is empty"},
      {{"tokenize", m, "-f", ""}, "--file: the path is empty"},
      {{"tokenize", "", "--text", "a"}, "MODEL: the path is empty"},
      {{"logits", m, "--input", ids, "--output", ""}, "--output: the path is empty"},
      {{"logits", m, "--input", "", "--output", (tmp / "o").string()}, "--input: the path is empty"},
      {{"grad", m, "--input", ids, "--output", ""}, "--output: the path is empty"},
      {{"score", m, "--data", ""}, "--data: the path is empty"},
      {{"train", m, "--data", text, "--out", ""}, "--out: the path is empty"},
      {{"train", m, "--data", "", "--out", (tmp / "tr").string()}, "--data: the path is empty"},
      {{"init", "--config", m + "/config.json", "--out", ""}, "--out: the path is empty"},
      {{"init", "--config", "", "--out", (tmp / "i").string()}, "--config: the path is empty"},
      {{"convert", m, ""}, "DST_DIR: the path is empty"},
      {{"convert", "", (tmp / "c").string()}, "SRC_DIR: the path is empty"},
      {{"info", ""}, "MODEL: the path is empty"},
      {{"serve", m, "--sessions", ""}, "--sessions: the path is empty"},
  };
  for (const auto& [args, message] : cases) {
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 2) << shown(args) << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error: " + message)) << shown(args) << "\n" << r.err;
  }
  // Nothing was written into the current directory or the temp one.
  EXPECT_FALSE(std::filesystem::exists(tmp / "o"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "tr"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "i"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "c"));
}

// A directory the program cannot create files in, even as root: /sys.
bool sys_is_unwritable() {
  const std::filesystem::path probe = "/sys/ssm-probe";
  return !std::filesystem::exists(probe) && !std::ofstream(probe);
}

TEST(CliAudit, UnwritableOutputFailsNamingThePathAndLeavesNoFile) {
  if (!sys_is_unwritable()) GTEST_SKIP() << "/sys is writable here";
  const std::string m = golden_dir("mamba2_ssm_tiny");
  const std::string ids = m + "/golden.safetensors";
  testing::TempDir tmp;
  const std::string text = (tmp / "t.txt").string();
  testing::write_bytes(text, std::string(4000, 'a'));
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"logits", m, "--input", ids, "--output", "/sys/ssm-l.safetensors"}, "/sys/ssm-l.safetensors"},
      {{"grad", m, "--input", ids, "--output", "/sys/ssm-g.safetensors"}, "/sys/ssm-g.safetensors"},
      {{"generate", m, "-p", "hi", "-n", "2", "--session", "/sys/ssm-s.state"}, "/sys/ssm-s.state"},
      {{"init", "--config", m + "/config.json", "--out", "/sys/ssm-i"}, "/sys/ssm-i"},
      {{"convert", m, "/sys/ssm-c"}, "/sys/ssm-c"},
      {{"train", m, "--data", text, "--out", "/sys/ssm-t", "--steps", "1", "--seq-len", "8", "--batch", "1",
        "--warmup", "0"},
       "/sys/ssm-t"},
  };
  for (const auto& [args, path] : cases) {
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 1) << shown(args) << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error: " + path)) << shown(args) << "\n" << r.err;
    EXPECT_FALSE(contains(r.err, "filesystem error")) << "a raw library message: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(path)) << path;
  }
}

// The ids a run printed with --print-ids: its first line, comma-separated.
std::vector<int64_t> printed_ids(const std::string& out) {
  std::vector<int64_t> ids;
  std::stringstream line(out.substr(0, out.find('\n')));
  for (std::string id; std::getline(line, id, ',');) ids.push_back(std::stoll(id));
  return ids;
}

TEST(CliAudit, PromptBytesThatAreNotUtf8AreEncodedByteByByte) {
  const std::string m = golden_dir("mamba2_hf_tiny");  // a byte-level tokenizer: id = byte
  testing::TempDir tmp;
  const std::string bytes("a\xff\xfe\x00\x80" "b\xc3", 7);
  testing::write_bytes(tmp / "bin.dat", bytes);
  const auto check = [&](const std::vector<std::string>& args, const std::string& expected) {
    const testing::CliRun r = run_ssm(args);
    ASSERT_EQ(r.code, 0) << shown(args) << "\n" << r.err;
    const auto ids = printed_ids(r.out);
    ASSERT_GE(ids.size(), expected.size() + 2) << r.out;
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(ids[i], static_cast<unsigned char>(expected[i])) << "byte " << i << " of " << shown(args);
  };
  check({"generate", m, "-p", "\xff\xfe", "-n", "2", "--print-ids", "--temperature", "0", "-q"}, "\xff\xfe");
  check({"generate", m, "-f", (tmp / "bin.dat").string(), "-n", "2", "--print-ids", "--temperature", "0", "-q"},
        bytes);
  // Standard input too, and --json stays valid JSON (the text's bad bytes as U+FFFD).
  const testing::CliRun piped =
      testing::CliProcess({"generate", m, "-f", "-", "-n", "3", "--json", "--temperature", "0"}, bytes).wait();
  ASSERT_EQ(piped.code, 0) << piped.err;
  const auto doc = nlohmann::json::parse(piped.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << piped.out;
  EXPECT_EQ(doc["prompt_ids"].size(), bytes.size());
  const testing::CliRun tok = run_ssm({"tokenize", m, "--text", "\xff", "--json"});
  ASSERT_EQ(tok.code, 0) << tok.err;
  EXPECT_EQ(nlohmann::json::parse(tok.out)["ids"], nlohmann::json::array({255}));
}

}  // namespace
}  // namespace ssm
