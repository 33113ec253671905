// What an audit of every command as a new user found, kept as tests: an
// empty path is refused naming the flag (it used to pass as "the current
// directory" or fail late with a message naming no path), an output that
// cannot be written fails naming it and leaves no file, and prompt bytes
// that are not UTF-8 are encoded byte by byte, never refused or crashed on.
// The second audit (helper cli-qa, 2026-12-06): standard output that cannot
// be written fails the run, outputs follow symbolic links and never replace a
// device or a pipe, input_ids errors name the file, and what the user cannot
// read or write is said so before any work is done.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
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

TEST(CliAudit, StandardOutputThatCannotBeWrittenFailsTheRun) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  for (const std::string& command : {std::string("tokenize --text hi"), std::string("info --json"),
                                     std::string("generate --prompt-ids 1,2 -n 2 -q")}) {
    const std::string line = "exec '" SSM_CLI_PATH "' " + command.substr(0, command.find(' ')) + " '" + m + "'" +
                             command.substr(command.find(' ')) + " > /dev/full";
    const testing::CliRun r = testing::CliProcess({"-c", line}, "", "/bin/sh").wait();
    EXPECT_EQ(r.code, 1) << line << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error: cannot write to standard output")) << line << "\n" << r.err;
  }
  // generate stops at the first text it cannot write, and keeps the state
  // reached as on Ctrl-C.
  testing::TempDir tmp;
  const std::string session = (tmp / "s.state").string();
  const std::string line = "exec '" SSM_CLI_PATH "' generate '" + m +
                           "' --prompt-ids 72,105 -n 3000 --ignore-eos --temperature 0 --session '" + session +
                           "' > /dev/full";
  const testing::CliRun r = testing::CliProcess({"-c", line}, "", "/bin/sh").wait();
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "ssm: error: cannot write to standard output: No space left on device; the state "
                              "reached is saved in " + session)) << r.err;
  EXPECT_FALSE(contains(r.err, "generated: 3000 tokens")) << r.err;
  EXPECT_TRUE(std::filesystem::is_regular_file(session));
}

// A 1 x 2 input_ids file of the given ids (I64), as `ssm logits` reads it.
void write_ids(const std::filesystem::path& path, std::vector<int64_t> ids) {
  const std::string header = "{\"input_ids\":{\"dtype\":\"I64\",\"shape\":[1," + std::to_string(ids.size()) +
                             "],\"data_offsets\":[0," + std::to_string(8 * ids.size()) + "]}}";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(ids.data()), 8 * ids.size());
  testing::write_bytes(path, bytes);
}

TEST(CliAudit, OutputsFollowSymbolicLinksAndNeverReplaceADeviceOrAPipe) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  testing::TempDir tmp;
  write_ids(tmp / "ids.safetensors", {1, 2, 3});
  const std::string ids = (tmp / "ids.safetensors").string();
  std::filesystem::create_directory(tmp / "real");
  std::filesystem::create_symlink("real/logits.safetensors", tmp / "link.safetensors");
  std::filesystem::create_symlink("real/chat.state", tmp / "chat.state");
  const auto logits = [&](const std::filesystem::path& out) {
    return run_ssm({"logits", m, "--input", ids, "--output", out.string()});
  };
  // The link stays a link and its target gets the contents, as with `>`.
  testing::CliRun r = logits(tmp / "link.safetensors");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(tmp / "link.safetensors"));
  EXPECT_TRUE(std::filesystem::is_regular_file(tmp / "real/logits.safetensors"));
  r = run_ssm({"generate", m, "--prompt-ids", "1,2", "-n", "2", "-q", "--session", (tmp / "chat.state").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(tmp / "chat.state"));
  EXPECT_TRUE(std::filesystem::is_regular_file(tmp / "real/chat.state"));
  // A pipe, and a link to a device, are refused and left as they were.
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0644), 0);
  std::filesystem::create_symlink("/dev/null", tmp / "null");
  for (const std::string name : {"fifo", "null"}) {
    r = logits(tmp / name);
    EXPECT_EQ(r.code, 2) << name << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error: --output: " + (tmp / name).string() + ": is not a regular file"))
        << r.err;
  }
  EXPECT_EQ(std::filesystem::status(tmp / "fifo").type(), std::filesystem::file_type::fifo);
  EXPECT_EQ(std::filesystem::status("/dev/null").type(), std::filesystem::file_type::character);
}

TEST(CliAudit, InputIdsErrorsNameTheFileAndThePlace) {
  const std::string m = golden_dir("mamba2_hf_tiny");  // vocabulary 256
  testing::TempDir tmp;
  write_ids(tmp / "empty.safetensors", {});
  write_ids(tmp / "bad.safetensors", {1, 256});
  for (const std::string command : {"logits", "grad", "score"}) {
    for (const auto& [file, message] :
         {std::pair<std::string, std::string>{"empty.safetensors", ": input_ids is (1, 0): there are no tokens"},
          {"bad.safetensors", ": input_ids[0, 1] = 256 is outside the model's vocabulary [0, 256)"}}) {
      std::vector<std::string> args = {command, m, "--input", (tmp / file).string()};
      if (command != "score") args.insert(args.end(), {"--output", (tmp / "out.safetensors").string()});
      const testing::CliRun r = run_ssm(args);
      EXPECT_EQ(r.code, 1) << shown(args) << "\n" << r.err;
      EXPECT_TRUE(contains(r.err, "ssm: error: " + (tmp / file).string() + message)) << shown(args) << r.err;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "out.safetensors"));
}

// ssm as the user nobody where the tests run as root (root reads and writes
// whatever the permissions say); nullopt where that cannot be done.
std::optional<testing::CliRun> run_ssm_unprivileged(const std::vector<std::string>& args) {
  if (::geteuid() != 0) return run_ssm(args);
  if (!std::filesystem::exists("/usr/bin/setpriv")) return std::nullopt;
  std::vector<std::string> wrapped = {"--reuid=65534", "--regid=65534", "--clear-groups", SSM_CLI_PATH};
  wrapped.insert(wrapped.end(), args.begin(), args.end());
  return testing::CliProcess(wrapped, "", "/usr/bin/setpriv").wait();
}

TEST(CliAudit, UnreadableModelAndUnwritableInPlaceAreSaidBeforeAnyWork) {
  testing::TempDir tmp;
  const std::filesystem::path m = tmp / "m";
  std::filesystem::create_directory(m);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(std::filesystem::path(golden_dir("mamba2_hf_tiny")) / f, m / f);
  testing::write_bytes(tmp / "data.txt", std::string(4000, 'a'));
  ::chmod(tmp.path().c_str(), 0755);
  ::chmod((tmp / "data.txt").c_str(), 0644);
  ::chmod((m / "model.safetensors").c_str(), 0644);
  ::chmod((m / "config.json").c_str(), 0644);
  // A model directory that cannot be written: the run is refused at once,
  // not after its training when the weights are saved.
  ::chmod(m.c_str(), 0555);
  auto r = run_ssm_unprivileged({"train", m.string(), "--data", (tmp / "data.txt").string(), "--in-place",
                                 "--steps", "1", "--seq-len", "8", "--batch", "1", "--warmup", "0"});
  if (!r) GTEST_SKIP() << "running as root without setpriv";
  EXPECT_EQ(r->code, 2) << r->err;
  EXPECT_TRUE(contains(r->err, "ssm: error: --in-place: cannot write in " + m.string() + ": Permission denied"))
      << r->err;
  EXPECT_FALSE(contains(r->err, "step 1/1")) << r->err;
  // A model directory that cannot be read is not one "without config.json".
  ::chmod(m.c_str(), 0);
  r = run_ssm_unprivileged({"info", m.string()});
  EXPECT_EQ(r->code, 2) << r->err;
  EXPECT_TRUE(contains(r->err, "ssm: error: MODEL: " + m.string() + ": cannot read: Permission denied")) << r->err;
  ::chmod(m.c_str(), 0755);
}

}  // namespace
}  // namespace ssm
