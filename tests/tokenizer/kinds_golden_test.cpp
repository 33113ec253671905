// The tokenizer.json kinds the HF families ship (tests/golden/tokenizer_kinds:
// SentencePiece BPE with byte fallback, legacy and Metaspace; Llama-3's
// split-regex byte-level BPE) against the ids and text HF recorded for each
// case: without the post-processor's tokens, with them, and HF's decode.
#include <gtest/gtest.h>

#include "ssm/io/json.h"
#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {
namespace {

const std::string kDir = std::string(SSM_GOLDEN_DIR) + "/tokenizer_kinds/";

class TokenizerKind : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Tokenizer> tokenizer() const { return load_tokenizer_json(kDir + GetParam() + "/tokenizer.json"); }
  Json cases() const {
    const Json c = load_json_file(kDir + GetParam() + "/encodings.json");
    EXPECT_TRUE(c.is_array());
    EXPECT_GE(c.size(), 20u);
    return c;
  }
};

TEST_P(TokenizerKind, EncodesEveryCaseWithoutSpecialTokens) {
  const auto tok = tokenizer();
  for (const Json& c : cases()) {
    const auto text = c.at("text").get<std::string>();
    SCOPED_TRACE(::testing::Message() << "text: " << Json(text).dump());
    EXPECT_EQ(tok->encode(text), c.at("ids").get<std::vector<int32_t>>());
  }
}

TEST_P(TokenizerKind, EncodesEveryCaseWithSpecialTokens) {
  const auto tok = tokenizer();
  for (const Json& c : cases()) {
    const auto text = c.at("text").get<std::string>();
    SCOPED_TRACE(::testing::Message() << "text: " << Json(text).dump());
    EXPECT_EQ(tok->encode_with_special(text), c.at("ids_with_special").get<std::vector<int32_t>>());
  }
}

TEST_P(TokenizerKind, DecodesEveryCaseAsHf) {
  const auto tok = tokenizer();
  for (const Json& c : cases()) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE(::testing::Message() << "text: " << c.at("text").dump());
    EXPECT_EQ(tok->decode(ids), c.at("decoded").get<std::string>());
  }
}

// Streaming must print exactly the full decode, also where byte-fallback
// tokens split one character (every CJK and emoji case here does).
TEST_P(TokenizerKind, StreamingEqualsDecodeOnEveryCase) {
  const auto tok = tokenizer();
  for (const Json& c : cases()) {
    for (const char* key : {"ids", "ids_with_special"}) {
      const auto ids = c.at(key).get<std::vector<int32_t>>();
      SCOPED_TRACE(::testing::Message() << key << " of " << c.at("text").dump());
      StreamingDecoder stream(*tok);
      std::string out;
      for (const int32_t id : ids) {
        const std::string piece = stream.push(id);
        // Nothing printed is ever a broken character.
        EXPECT_EQ(piece.find("\xef\xbf\xbd"), std::string::npos) << Json(piece).dump();
        out += piece;
      }
      out += stream.finish();
      EXPECT_EQ(out, tok->decode(ids));
    }
  }
}

TEST_P(TokenizerKind, SkippingSpecialTokensDropsTheTemplate) {
  const auto tok = tokenizer();
  for (const Json& c : cases()) {
    const auto with = c.at("ids_with_special").get<std::vector<int32_t>>();
    const auto without = c.at("ids").get<std::vector<int32_t>>();
    // Texts that spell special tokens keep them in ids; only the others compare.
    bool spelled = false;
    for (const int32_t id : without) spelled = spelled || tok->is_special(id);
    if (spelled) continue;
    SCOPED_TRACE(::testing::Message() << "text: " << c.at("text").dump());
    EXPECT_EQ(tok->decode(with, /*skip_special=*/true), tok->decode(without));
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, TokenizerKind, ::testing::Values("sp_bpe", "metaspace", "llama3"));

}  // namespace
}  // namespace ssm
