// Streaming decode: characters split over tokens come out whole, once.
#include <gtest/gtest.h>

#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

std::unique_ptr<Tokenizer> golden() {
  return load_tokenizer_json(std::string(SSM_GOLDEN_DIR) + "/tokenizer/tokenizer.json");
}

bool is_valid_utf8(std::string_view s) { return tok::valid_utf8_prefix(s) == s.size(); }

TEST(StreamingDecoder, MultiByteCharacterSplitOverTokens) {
  const auto tokenizer = golden();
  const std::string text = "emoji 😀🚀👍🏽 中文 done";
  const std::vector<int32_t> ids = tokenizer->encode(text);
  StreamingDecoder decoder(*tokenizer);
  std::string streamed;
  int held_back = 0;
  for (const int32_t id : ids) {
    const std::string piece = decoder.push(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << testing::PrintToString(piece);
    if (piece.empty()) ++held_back;
    streamed += piece;
  }
  EXPECT_GT(held_back, 0) << "the text should split some character over tokens";
  EXPECT_EQ(decoder.finish(), "");
  EXPECT_EQ(streamed, text);
}

TEST(StreamingDecoder, HoldsBackOnlyTheIncompleteTail) {
  const auto tokenizer = make_raw_bytes_tokenizer();
  StreamingDecoder decoder(*tokenizer);
  // "é" is C3 A9, "😀" is F0 9F 98 80.
  EXPECT_EQ(decoder.push('a'), "a");
  EXPECT_EQ(decoder.push(0xC3), "");
  EXPECT_EQ(decoder.pending_bytes(), 1u);
  EXPECT_EQ(decoder.push(0xA9), "\xc3\xa9");
  EXPECT_EQ(decoder.push(0xF0), "");
  EXPECT_EQ(decoder.push(0x9F), "");
  EXPECT_EQ(decoder.push(0x98), "");
  EXPECT_EQ(decoder.push(0x80), "\xf0\x9f\x98\x80");
  EXPECT_EQ(decoder.pending_bytes(), 0u);
}

TEST(StreamingDecoder, InvalidBytesPassThroughAndFinishFlushes) {
  const auto tokenizer = make_raw_bytes_tokenizer();
  StreamingDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(0xFF), "\xff");  // can never start a character
  EXPECT_EQ(decoder.push(0xE0), "");      // may start one
  EXPECT_EQ(decoder.push(0x41),
            "\xe0"
            "A");  // and did not
  EXPECT_EQ(decoder.push(0xE4), "");
  EXPECT_EQ(decoder.finish(), "\xe4");  // the stream ended inside it
  EXPECT_EQ(decoder.finish(), "");
}

TEST(StreamingDecoder, ConcatenationEqualsDecode) {
  const auto tokenizer = golden();
  const std::string text = "naïve café\xff\xc3 日本語のテキスト 👍🏽<|endoftext|>x";
  const std::vector<int32_t> ids = tokenizer->encode(text);
  StreamingDecoder decoder(*tokenizer);
  std::string streamed;
  for (const int32_t id : ids) streamed += decoder.push(id);
  streamed += decoder.finish();
  EXPECT_EQ(streamed, tokenizer->decode(ids));
}

TEST(StreamingDecoder, SkipsSpecialTokensWhenAsked) {
  const auto tokenizer = golden();
  StreamingDecoder decoder(*tokenizer, /*skip_special=*/true);
  const std::vector<int32_t> ids = tokenizer->encode("a<|endoftext|>b");
  EXPECT_EQ(decoder.push(ids) + decoder.finish(), "ab");
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(tok::incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(tok::incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(tok::incomplete_utf8_tail("a\xc3"), 1u);
  EXPECT_EQ(tok::incomplete_utf8_tail("a\xc3\xa9"), 0u);
  EXPECT_EQ(tok::incomplete_utf8_tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(tok::incomplete_utf8_tail("\xe0\x80"), 0u);  // overlong: never valid
  EXPECT_EQ(tok::incomplete_utf8_tail("\xed\xa0"), 0u);  // surrogate: never valid
  EXPECT_EQ(tok::incomplete_utf8_tail("\xff"), 0u);
  EXPECT_EQ(tok::incomplete_utf8_tail("\x80\x80\x80"), 0u);
}

}  // namespace
}  // namespace ssm
