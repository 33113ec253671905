// The pipeline's parts on their own: UTF-8, the byte alphabet, added-token
// options, prefix space, Split sequences, ignore_merges.
#include <gtest/gtest.h>

#include <set>

#include "ssm/io/json.h"
#include "ssm/tokenizer/added_tokens.h"
#include "ssm/tokenizer/byte_level.h"
#include "ssm/tokenizer/regex.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

Json golden_json() {
  return load_json_file(std::string(SSM_GOLDEN_DIR) + "/tokenizer/tokenizer.json");
}

std::unique_ptr<Tokenizer> from(const Json& j) { return parse_tokenizer_json(j.dump(), "variant"); }

TEST(Utf8, DecodeIsStrict) {
  EXPECT_EQ(tok::decode_utf8("\xc3\xa9").code_point, 0xE9u);
  EXPECT_EQ(tok::decode_utf8("\xf0\x9f\x98\x80").code_point, 0x1F600u);
  EXPECT_EQ(tok::decode_utf8("\xc0\xaf").length, 0u);          // overlong
  EXPECT_EQ(tok::decode_utf8("\xed\xa0\x80").length, 0u);      // surrogate
  EXPECT_EQ(tok::decode_utf8("\xf4\x90\x80\x80").length, 0u);  // past U+10FFFF
  EXPECT_EQ(tok::decode_utf8("\xe4\xb8").length, 0u);          // cut short
  EXPECT_EQ(tok::valid_utf8_prefix("abcdefghij\xc3\xa9xyz\xff rest"), 15u);
}

TEST(ByteLevel, AlphabetIsABijection) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = tok::byte_to_char(static_cast<uint8_t>(b));
    EXPECT_EQ(tok::char_to_byte(c), b);
    seen.insert(c);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(tok::to_byte_level(" \n"), "Ġ\xc4\x8a");  // "ĠĊ"
  EXPECT_EQ(tok::from_byte_level("Ġhello"), " hello");
  EXPECT_FALSE(tok::from_byte_level("\xe4\xb8\xad").has_value());  // "中" is not in it
}

TEST(AddedTokens, LeftmostLongestWithStripAndSingleWord) {
  using tok::AddedToken;
  tok::AddedTokenMatcher matcher({
      AddedToken{.id = 1, .content = "<a>"},
      AddedToken{.id = 2, .content = "<a><b>"},
      AddedToken{.id = 3, .content = "[L]", .lstrip = true},
      AddedToken{.id = 4, .content = "[R]", .rstrip = true},
      AddedToken{.id = 5, .content = "cat", .single_word = true},
  });
  auto split = [&](std::string_view text) {
    std::vector<tok::AddedTokenMatcher::Piece> pieces;
    matcher.split(text, pieces);
    std::string out;
    for (const auto& p : pieces)
      out += p.id >= 0 ? "#" + std::to_string(p.id) : "|" + std::string(p.text) + "|";
    return out;
  };
  EXPECT_EQ(split("x<a><b>y<a>"), "|x|#2|y|#1");
  EXPECT_EQ(split("x  [L]  y"), "|x|#3|  y|");
  EXPECT_EQ(split("x  [R]  y"), "|x  |#4|y|");
  EXPECT_EQ(split("a cat, concat cats"), "|a |#5|, concat cats|");
  EXPECT_EQ(split(""), "");
}

TEST(Pipeline, AddPrefixSpace) {
  Json j = golden_json();
  const auto plain = from(j);
  j["pre_tokenizer"]["add_prefix_space"] = true;
  const auto prefixed = from(j);
  EXPECT_EQ(prefixed->encode("hello world"), plain->encode(" hello world"));
  EXPECT_EQ(prefixed->encode(" hello"), plain->encode(" hello"));
  // Every segment between added tokens gets its own space, as in HF.
  EXPECT_EQ(prefixed->encode("a<|endoftext|>b"), [&] {
    std::vector<int32_t> ids = plain->encode(" a");
    ids.push_back(0);
    for (int32_t id : plain->encode(" b")) ids.push_back(id);
    return ids;
  }());
}

TEST(Pipeline, SplitSequenceMatchesByteLevelRegex) {
  Json j = golden_json();
  const auto plain = from(j);
  // The layout newer byte-level tokenizers use: the regex as its own Split
  // step, then ByteLevel without a regex.
  auto split_then_byte_level = [&](const Json& pattern) {
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         Json::array(
             {{{"type", "Split"},
               {"pattern", pattern},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
    return from(j);
  };
  const std::string text = "The quick brown fox, it's 42 naïve\n\n  end";
  EXPECT_EQ(split_then_byte_level({{"Regex", tok::kGpt2SplitPattern}})->encode(text),
            plain->encode(text));
  // A literal String pattern splits at every occurrence and keeps it.
  const auto commas = split_then_byte_level({{"String", ","}});
  std::vector<int32_t> expected;
  for (const char* piece : {"a b", ",", " c"})
    for (const int32_t id : from(j)->encode(piece)) expected.push_back(id);
  EXPECT_EQ(commas->encode("a b, c"), expected);
}

TEST(Pipeline, IgnoreMergesEmitsWholeWords) {
  Json j = golden_json();
  j["model"]["ignore_merges"] = true;
  const auto t = from(j);
  const auto the = t->token_to_id("Ġthe");
  ASSERT_TRUE(the.has_value());
  EXPECT_EQ(t->encode(" the"), std::vector<int32_t>{*the});
}

TEST(Pipeline, NormalizedAddedTokensMatchAfterNormalization) {
  Json j = golden_json();
  // "é" written decomposed in the file; it must match the composed text.
  j["added_tokens"].push_back(
      {{"id", 3000}, {"content", "<e\xcc\x81>"}, {"special", false}, {"normalized", true}});
  const auto t = from(j);
  EXPECT_EQ(t->encode("x<\xc3\xa9>"), (std::vector<int32_t>{t->encode("x")[0], 3000}));
  EXPECT_EQ(t->encode("x<e\xcc\x81>"), (std::vector<int32_t>{t->encode("x")[0], 3000}));
  EXPECT_EQ(t->vocab_size(), 3001);
}

}  // namespace
}  // namespace ssm

namespace ssm {
namespace {

std::vector<std::string> gpt2_split(std::string_view text) {
  std::vector<std::string_view> pieces;
  tok::Regex(tok::kGpt2SplitPattern).split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(Gpt2Split, WordsNumbersPunctuationAndSpaces) {
  using V = std::vector<std::string>;
  EXPECT_EQ(gpt2_split("Hello, world!"), (V{"Hello", ",", " world", "!"}));
  EXPECT_EQ(gpt2_split("it's  42x"), (V{"it", "'s", " ", " 42", "x"}));
  EXPECT_EQ(gpt2_split("a   b\n\n"), (V{"a", "  ", " b", "\n\n"}));
  EXPECT_EQ(gpt2_split("naïve 中文"), (V{"naïve", " 中文"}));
  // NEL is whitespace to HF (Oniguruma), so it splits like a space.
  EXPECT_EQ(gpt2_split("a \xc2\x85"
                       "b"),
            (V{"a", " ", "\xc2\x85", "b"}));
  // U+3000 (ideographic space) is whitespace too.
  EXPECT_EQ(gpt2_split("x\xe3\x80\x80y"), (V{"x", "\xe3\x80\x80", "y"}));
}

}  // namespace
}  // namespace ssm
