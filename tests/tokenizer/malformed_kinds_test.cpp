// The SentencePiece-style parts of tokenizer.json, malformed or unsupported:
// each an ssm::Error naming the file and the component, never a tokenizer
// that silently encodes differently from HF.
#include <gtest/gtest.h>

#include <functional>

#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {
namespace {

constexpr const char* kSource = "models/sp/tokenizer.json";

Json sp_bpe() { return load_json_file(std::string(SSM_GOLDEN_DIR) + "/tokenizer_kinds/sp_bpe/tokenizer.json"); }

void expect_error(const std::function<void(Json&)>& edit, const std::string& needle) {
  Json j = sp_bpe();
  edit(j);
  try {
    parse_tokenizer_json(j.dump(), kSource);
    ADD_FAILURE() << "no error; wanted " << needle;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(kSource), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << message;
  }
}

TEST(TokenizerJsonKinds, UnedittedFileLoads) {
  const auto t = parse_tokenizer_json(sp_bpe().dump(), kSource);
  EXPECT_EQ(t->encode_with_special("").size(), 1u);
}

TEST(TokenizerJsonKinds, UnknownTypesNameTheComponent) {
  expect_error([](Json& j) { j["normalizer"]["normalizers"][0]["type"] = "Lowercase"; },
               "normalizer.normalizers[0]: unsupported normalizer type 'Lowercase'");
  expect_error([](Json& j) { j["decoder"]["decoders"][2]["type"] = "CTC"; },
               "decoder.decoders[2]: unsupported decoder type 'CTC'");
  expect_error([](Json& j) { j["post_processor"]["type"] = "Wordpiece"; },
               "post_processor: unsupported post_processor type 'Wordpiece'");
  expect_error([](Json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "unsupported pre_tokenizer type");
  expect_error([](Json& j) { j["decoder"] = {{"type", "ByteLevel"}}; }, "pre_tokenizer: the decoder is ByteLevel");
}

TEST(TokenizerJsonKinds, BadComponentFields) {
  expect_error([](Json& j) { j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", "\\s"}}; },
               "normalizer.normalizers[1].pattern: a Regex pattern is not supported");
  expect_error([](Json& j) { j["normalizer"]["normalizers"][0].erase("prepend"); }, "missing key 'prepend'");
  expect_error([](Json& j) { j["decoder"]["decoders"][3]["start"] = -1; }, "decoder.decoders[3].start");
  expect_error([](Json& j) { j["decoder"]["decoders"][3]["content"] = "ab"; }, "expected one character");
  expect_error(
      [](Json& j) {
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "sometimes"}};
      },
      "pre_tokenizer.prepend_scheme");
  expect_error([](Json& j) { j["model"]["byte_fallback"] = "yes"; }, "model.byte_fallback");
}

TEST(TokenizerJsonKinds, BadTemplates) {
  expect_error([](Json& j) { j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>"; },
               "special token \"<bos>\" is not in post_processor.special_tokens");
  expect_error([](Json& j) { j["post_processor"]["special_tokens"]["<s>"]["ids"][0] = 2; },
               "post_processor.special_tokens[\"<s>\"].tokens[0]: token and id 2 disagree");
  expect_error([](Json& j) { j["post_processor"]["single"].erase(1); }, "the template has no $A");
  expect_error([](Json& j) { j["post_processor"]["single"][1]["Sequence"]["id"] = "B"; }, "only A exists");
}

TEST(TokenizerJsonKinds, BadMerges) {
  expect_error([](Json& j) { j["model"]["merges"][0] = Json::array({"o", "zzz"}); },
               "model.merges[0]: second token \"zzz\" is not in the vocab");
  expect_error([](Json& j) { j["model"]["merges"][1] = 7; }, "model.merges[1]");
}

// Without the <0xNN> entries a character outside the vocab becomes <unk>, as
// in HF; with fuse_unk a run of them is one <unk>.
TEST(TokenizerJsonKinds, UnknownCharactersWithoutByteFallback) {
  Json j = sp_bpe();
  j["model"]["byte_fallback"] = false;
  const auto t = parse_tokenizer_json(j.dump(), kSource);
  const std::vector<int32_t> ids = t->encode("中文");
  ASSERT_EQ(ids.size(), 2u);  // "▁" then one fused <unk>
  EXPECT_EQ(ids[1], 0);
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(parse_tokenizer_json(j.dump(), kSource)->encode("中文").size(), 3u);
}

}  // namespace
}  // namespace ssm
