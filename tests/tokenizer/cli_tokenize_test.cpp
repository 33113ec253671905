// `ssm tokenize` end to end: the program prints what the library computes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

struct CliResult {
  int status;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  const std::string command = std::string(SSM_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kTokenizerDir = std::string(SSM_GOLDEN_DIR) + "/tokenizer";

TEST(CliTokenize, EncodesToCommaSeparatedIds) {
  const CliResult r = run_cli("tokenize " + kTokenizerDir + " --text 'Hello, world!'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "41,1096,334,13,299,261,1502,2\n");
}

TEST(CliTokenize, DecodesIds) {
  const CliResult r = run_cli("tokenize " + kTokenizerDir +
                              "/tokenizer.json --decode --text '41,1096, 334,13,299,261,1502,2'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "Hello, world!\n");
}

TEST(CliTokenize, RawBytesForModelWithoutTokenizer) {
  const CliResult r =
      run_cli("tokenize " + std::string(SSM_GOLDEN_DIR) + "/mamba2_hf_tiny --text hi");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "104,105\n");
}

TEST(CliTokenize, BadIdsAreErrors) {
  CliResult r = run_cli("tokenize " + kTokenizerDir + " --decode --text '1,x'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("'x' is not a token id"), std::string::npos) << r.out;
  r = run_cli("tokenize " + kTokenizerDir + " --decode --text 99999");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("99999"), std::string::npos) << r.out;
}

}  // namespace
