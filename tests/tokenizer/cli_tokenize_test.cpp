// `ssm tokenize` end to end: the program prints what the library computes.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.h"

namespace ssm {
namespace {

using testing::contains;
using testing::run_ssm;

const std::string kTokenizerDir = std::string(SSM_GOLDEN_DIR) + "/tokenizer";

TEST(CliTokenize, EncodesToCommaSeparatedIds) {
  const testing::CliRun r = run_ssm({"tokenize", kTokenizerDir, "--text", "Hello, world!"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "41,1096,334,13,299,261,1502,2\n");
}

TEST(CliTokenize, DecodesIds) {
  const testing::CliRun r = run_ssm({"tokenize", kTokenizerDir + "/tokenizer.json", "--decode",
                                     "--text", "41,1096, 334,13,299,261,1502,2"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world!\n");
}

TEST(CliTokenize, RawBytesForModelWithoutTokenizer) {
  const testing::CliRun r =
      run_ssm({"tokenize", std::string(SSM_GOLDEN_DIR) + "/mamba2_hf_tiny", "--text", "hi"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "104,105\n");
}

TEST(CliTokenize, BadIdsAreErrors) {
  testing::CliRun r = run_ssm({"tokenize", kTokenizerDir, "--decode", "--text", "1,x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "'x' is not a token id")) << r.err;
  r = run_ssm({"tokenize", kTokenizerDir, "--decode", "--text", "99999"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "99999")) << r.err;
}

}  // namespace
}  // namespace ssm
