// The golden tokenizer (HF tokenizers, laid out like GPT-NeoX's) against the
// ids and decodings that HF itself recorded.
#include <gtest/gtest.h>

#include <thread>

#include "ssm/core/error.h"
#include "ssm/io/json.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {
namespace {

const std::string kDir = std::string(SSM_GOLDEN_DIR) + "/tokenizer";

TEST(TokenizerGolden, EncodesAndDecodesEveryRecordedCase) {
  const auto tokenizer = load_tokenizer_json(kDir + "/tokenizer.json");
  const Json cases = load_json_file(kDir + "/encodings.json");
  ASSERT_TRUE(cases.is_array());
  ASSERT_GT(cases.size(), 0u);
  for (const Json& c : cases) {
    const auto text = c.at("text").get<std::string>();
    const auto expected = c.at("ids").get<std::vector<int32_t>>();
    const auto decoded = c.at("decoded").get<std::string>();
    SCOPED_TRACE(::testing::Message() << "text: " << Json(text).dump());
    EXPECT_EQ(tokenizer->encode(text), expected);
    EXPECT_EQ(tokenizer->decode(expected), decoded);
  }
}

TEST(TokenizerGolden, LoadsFromModelDirectoryOrFile) {
  const auto from_dir = load_tokenizer_for_model(kDir);
  const auto from_file = load_tokenizer_for_model(kDir + "/tokenizer.json");
  EXPECT_EQ(from_dir->vocab_size(), 3000);
  EXPECT_EQ(from_dir->encode("Hello, world!"), from_file->encode("Hello, world!"));
}

TEST(TokenizerGolden, SpecialTokens) {
  const auto tokenizer = load_tokenizer_json(kDir + "/tokenizer.json");
  EXPECT_EQ(tokenizer->token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(tokenizer->token_to_id("Ġthe").has_value(), true);
  EXPECT_FALSE(tokenizer->token_to_id("no such token").has_value());
  EXPECT_TRUE(tokenizer->is_special(0));
  EXPECT_FALSE(tokenizer->is_special(2));
  const std::vector<int32_t> ids = tokenizer->encode("a<|endoftext|>b");
  EXPECT_EQ(tokenizer->decode(ids, /*skip_special=*/true), "ab");
}

TEST(TokenizerGolden, UnknownIdsDecodeToNothing) {
  const auto tokenizer = load_tokenizer_json(kDir + "/tokenizer.json");
  const std::vector<int32_t> ids = {41, -1, 3000, 1 << 30};
  EXPECT_EQ(tokenizer->decode(ids), "H");
}

TEST(RawBytesTokenizer, IdsAreBytes) {
  const auto tokenizer = make_raw_bytes_tokenizer();
  const std::string text("a\xff\x00é", 5);
  const std::vector<int32_t> ids = tokenizer->encode(text);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 0xff, 0, 0xc3, 0xa9}));
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(tokenizer->vocab_size(), 256);
}

TEST(RawBytesTokenizer, ChosenForModelWithoutTokenizerJson) {
  const auto tokenizer = load_tokenizer_for_model(std::string(SSM_GOLDEN_DIR) + "/mamba2_hf_tiny");
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  EXPECT_EQ(tokenizer->encode("hi"), (std::vector<int32_t>{'h', 'i'}));
}

TEST(LoadTokenizer, MissingPathIsAnError) {
  EXPECT_THROW(load_tokenizer_for_model("/nonexistent/model"), Error);
}

}  // namespace
}  // namespace ssm

namespace ssm {
namespace {

// One tokenizer serves many threads: the shared word cache must not change
// any result.
TEST(TokenizerGolden, ConcurrentEncodingMatchesSerial) {
  const auto tokenizer = load_tokenizer_json(kDir + "/tokenizer.json");
  const Json cases = load_json_file(kDir + "/encodings.json");
  std::vector<std::string> texts;
  for (const Json& c : cases) texts.push_back(c.at("text").get<std::string>());
  for (int i = 0; i < 200; ++i) texts.push_back("word" + std::to_string(i * 7919) + " and more");
  std::vector<std::vector<int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tokenizer->encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < texts.size(); ++i)
          if (tokenizer->encode(texts[(i + t * 31) % texts.size()]) !=
              serial[(i + t * 31) % texts.size()])
            ++mismatches[t];
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace ssm
