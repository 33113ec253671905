// `ssm tokenize` and the prompt of `ssm generate` on the tokenizer kinds of
// the HF families: the ids HF recorded, with the template's BOS by default
// and without it under --no-special; decode gives HF's text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ssm/io/json.h"
#include "support/cli.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

using testing::contains;
using testing::run_ssm;

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (const int32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

const std::string kKinds = std::string(SSM_GOLDEN_DIR) + "/tokenizer_kinds/";

class CliKinds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ssm_cli_kinds_" + std::to_string(::getpid()) + "_" + GetParam());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string tokenizer() const { return kKinds + GetParam() + "/tokenizer.json"; }
  Json cases() const { return load_json_file(kKinds + GetParam() + "/encodings.json"); }
  fs::path dir_;
};

TEST_P(CliKinds, TokenizeGivesHfIdsWithAndWithoutSpecialTokens) {
  for (const Json& c : cases()) {
    const std::string file = write("text", c.at("text").get<std::string>());
    SCOPED_TRACE(c.at("text").dump());
    testing::CliRun r = run_ssm({"tokenize", tokenizer(), "-f", file});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, join(c.at("ids_with_special").get<std::vector<int32_t>>()) + "\n");
    r = run_ssm({"tokenize", tokenizer(), "-f", file, "--no-special"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, join(c.at("ids").get<std::vector<int32_t>>()) + "\n");
  }
}

TEST_P(CliKinds, DecodeGivesHfText) {
  for (const Json& c : cases()) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    if (ids.empty()) continue;  // an empty id list is a usage error
    SCOPED_TRACE(c.at("text").dump());
    const testing::CliRun r = run_ssm({"tokenize", tokenizer(), "--decode", "--text", join(ids)});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, c.at("decoded").get<std::string>() + "\n");
  }
  const Json first = cases().at(0);
  const testing::CliRun r = run_ssm({"tokenize", tokenizer(), "--decode", "--skip-special", "--text",
               join(first.at("ids_with_special").get<std::vector<int32_t>>())});
  EXPECT_EQ(r.out, first.at("decoded").get<std::string>() + "\n");
}

TEST_P(CliKinds, FlagsThatContradictAreUsageErrors) {
  testing::CliRun r = run_ssm({"tokenize", tokenizer(), "--decode", "--no-special", "--text", "5"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "--no-special")) << r.err;
  r = run_ssm({"tokenize", tokenizer(), "--skip-special", "--text", "hi"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "--skip-special")) << r.err;
  r = run_ssm({"tokenize", tokenizer(), "--no-special=maybe", "--text", "hi"});
  EXPECT_EQ(r.code, 2) << r.err;
}

// generate encodes its prompt as tokenize does: BOS first unless --no-special.
TEST_P(CliKinds, GeneratePromptIdsAreTokenizeIds) {
  const std::string model = (dir_ / "model").string();
  const std::string config = write(
      "config.json",
      R"({"d_model": 32, "n_layer": 1, "vocab_size": 3008, "ssm_cfg": {"layer": "Mamba2", "d_state": 16,)"
      R"( "headdim": 16, "chunk_size": 16}, "tie_embeddings": true})");
  const testing::CliRun init = run_ssm({"init", "--config", config, "--out", model, "--seed", "1"});
  ASSERT_EQ(init.code, 0) << init.err;
  fs::copy_file(tokenizer(), fs::path(model) / "tokenizer.json");
  const Json c = cases().at(0);
  const std::string file = write("prompt", c.at("text").get<std::string>());
  testing::CliRun r = run_ssm({"generate", model, "-f", file, "-n", "0", "--print-ids", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, join(c.at("ids_with_special").get<std::vector<int32_t>>()) + "\n");
  r = run_ssm({"generate", model, "-f", file, "-n", "0", "--print-ids", "-q", "--no-special"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, join(c.at("ids").get<std::vector<int32_t>>()) + "\n");
  r = run_ssm({"generate", model, "--prompt-ids", "5", "--no-special", "-n", "0"});
  EXPECT_EQ(r.code, 2) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Kinds, CliKinds, ::testing::Values("sp_bpe", "metaspace", "llama3"));

}  // namespace
}  // namespace ssm
