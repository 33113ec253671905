// A malformed or unsupported tokenizer.json is an ssm::Error that names the
// file and the problem, never a crash or a half-working tokenizer.
#include <gtest/gtest.h>

#include <functional>

#include "ssm/core/error.h"
#include "ssm/io/json.h"
#include "ssm/tokenizer/byte_level.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {
namespace {

constexpr const char* kSource = "models/x/tokenizer.json";

// The smallest byte-level BPE: the 256 byte tokens, "ab", one merge.
Json minimal() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  return Json{
      {"version", "1.0"},
      {"added_tokens", Json::array({{{"id", 257}, {"content", "<|end|>"}, {"special", true}}})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array({"a b"})}}},
  };
}

// Expects parsing to throw an ssm::Error whose message names the file and
// contains `needle`.
void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_tokenizer_json(text, kSource);
    ADD_FAILURE() << "no error for: " << text.substr(0, 200);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(kSource), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos)
        << "wanted '" << needle << "' in: " << message;
  }
}

void expect_error(const std::function<void(Json&)>& edit, const std::string& needle) {
  Json j = minimal();
  edit(j);
  expect_error(j.dump(), needle);
}

TEST(TokenizerJson, MinimalFileWorks) {
  const auto t = parse_tokenizer_json(minimal().dump(), kSource);
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(t->encode("x<|end|>"), (std::vector<int32_t>{'x', 257}));
  EXPECT_EQ(t->vocab_size(), 258);
}

TEST(TokenizerJson, PairAndStringMergesAgree) {
  Json j = minimal();
  j["model"]["merges"] = Json::array({Json::array({"a", "b"})});
  const auto t = parse_tokenizer_json(j.dump(), kSource);
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{256, 'c'}));
}

TEST(TokenizerJson, BadJson) {
  expect_error("{\"model\": {", "malformed JSON");
  expect_error("", "malformed JSON");
}

TEST(TokenizerJson, NotAnObject) { expect_error("[1, 2]", "expected an object"); }

TEST(TokenizerJson, MissingModel) {
  expect_error([](Json& j) { j.erase("model"); }, "missing key 'model'");
}

TEST(TokenizerJson, MissingVocabOrMerges) {
  expect_error([](Json& j) { j["model"].erase("vocab"); }, "missing key 'vocab'");
  expect_error([](Json& j) { j["model"].erase("merges"); }, "missing key 'merges'");
}

TEST(TokenizerJson, WrongTypes) {
  expect_error([](Json& j) { j["model"] = "BPE"; }, "model: expected an object");
  expect_error([](Json& j) { j["model"]["vocab"] = Json::array({"a"}); }, "model.vocab");
  expect_error([](Json& j) { j["model"]["merges"] = Json::object(); }, "model.merges");
  expect_error([](Json& j) { j["model"]["merges"][0] = 5; }, "model.merges[0]");
  expect_error(
      [](Json& j) {
        j["model"]["merges"][0] = Json::array({"a", 1});
      },
      "model.merges[0][1]");
  expect_error([](Json& j) { j["model"]["vocab"]["ab"] = "256"; }, "expected a token id");
  expect_error([](Json& j) { j["model"]["vocab"]["ab"] = 2.5; }, "expected a token id");
  expect_error([](Json& j) { j["model"]["vocab"]["ab"] = -3; }, "out of range");
  expect_error([](Json& j) { j["model"]["vocab"]["ab"] = 1LL << 40; }, "out of range");
  expect_error([](Json& j) { j["added_tokens"][0]["id"] = "x"; }, "added_tokens[0].id");
  expect_error([](Json& j) { j["added_tokens"][0].erase("content"); }, "added_tokens[0]");
  expect_error([](Json& j) { j["added_tokens"][0]["special"] = 1; }, "added_tokens[0].special");
  expect_error([](Json& j) { j["added_tokens"] = "none"; }, "added_tokens");
  expect_error([](Json& j) { j["normalizer"]["type"] = 3; }, "normalizer.type");
  expect_error([](Json& j) { j["pre_tokenizer"]["add_prefix_space"] = "no"; }, "add_prefix_space");
}

TEST(TokenizerJson, MergeNamingUnknownToken) {
  expect_error([](Json& j) { j["model"]["merges"][0] = "a zz"; }, "\"zz\" is not in the vocab");
  expect_error([](Json& j) { j["model"]["merges"].push_back("b c"); }, "merged token \"bc\"");
  expect_error([](Json& j) { j["model"]["merges"][0] = "ab"; }, "one space");
  expect_error([](Json& j) { j["model"]["merges"][0] = Json::array({"a"}); }, "model.merges[0]");
}

TEST(TokenizerJson, InconsistentVocab) {
  expect_error([](Json& j) { j["model"]["vocab"]["zz"] = 256; }, "share id 256");
  expect_error([](Json& j) { j["model"]["unk_token"] = "<unk>"; }, "model.unk_token");
}

TEST(TokenizerJson, UnsupportedParts) {
  expect_error([](Json& j) { j["model"]["type"] = "WordPiece"; }, "unsupported model type");
  expect_error([](Json& j) { j["normalizer"]["type"] = "Lowercase"; }, "unsupported normalizer");
  expect_error([](Json& j) { j["pre_tokenizer"] = nullptr; }, "pre_tokenizer");
  expect_error([](Json& j) { j["pre_tokenizer"]["type"] = "Whitespace"; },
               "unsupported pre_tokenizer");
  expect_error([](Json& j) { j["decoder"]["type"] = "WordPiece"; }, "unsupported decoder");
  expect_error([](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
               "continuing_subword_prefix");
  expect_error(
      [](Json& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers", Json::array({{{"type", "Split"},
                                            {"pattern", {{"Regex", "(unclosed"}}},
                                            {"behavior", "Isolated"}},
                                           {{"type", "ByteLevel"}, {"use_regex", false}}})}};
      },
      "pre_tokenizer.pretokenizers[0].pattern");
}

TEST(TokenizerJson, MissingFile) {
  EXPECT_THROW(load_tokenizer_json("/nonexistent/tokenizer.json"), Error);
}

}  // namespace
}  // namespace ssm
