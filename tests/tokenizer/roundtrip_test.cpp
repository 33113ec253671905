// Property tests: decode(encode(x)) gives x back, up to NFC, for random
// Unicode text and for random bytes (invalid UTF-8 included). Seeds are fixed
// so that a failure reproduces.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "ssm/io/json.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

std::unique_ptr<Tokenizer> golden() {
  return load_tokenizer_json(std::string(SSM_GOLDEN_DIR) + "/tokenizer/tokenizer.json");
}

std::unique_ptr<Tokenizer> golden_without_normalizer() {
  Json j = load_json_file(std::string(SSM_GOLDEN_DIR) + "/tokenizer/tokenizer.json");
  j["normalizer"] = nullptr;
  return parse_tokenizer_json(j.dump(), "golden without normalizer");
}

std::string nfc(std::string_view valid) {
  if (valid.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                              static_cast<utf8proc_ssize_t>(valid.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return s;
}

// NFC of each valid UTF-8 run, invalid bytes kept: what the tokenizer promises.
std::string nfc_of_bytes(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t valid = tok::valid_utf8_prefix(s);
    out += nfc(s.substr(0, valid));
    s.remove_prefix(valid);
    if (!s.empty()) {
      out += s.front();
      s.remove_prefix(1);
    }
  }
  return out;
}

char32_t random_code_point(std::mt19937& rng) {
  struct Range {
    char32_t lo, hi;
    int weight;
  };
  static constexpr Range kRanges[] = {
      {0x20, 0x7E, 40},    {0x09, 0x0D, 4},     {0xA0, 0x2FF, 6},      {0x300, 0x36F, 4},
      {0x370, 0x52F, 4},   {0x590, 0x6FF, 2},   {0x900, 0x97F, 2},     {0x1100, 0x11FF, 2},
      {0x2000, 0x206F, 3}, {0x3040, 0x30FF, 3}, {0x4E00, 0x9FFF, 5},   {0xAC00, 0xD7A3, 2},
      {0xE000, 0xF8FF, 1}, {0xFB00, 0xFFFD, 2}, {0x1F300, 0x1FAFF, 4}, {0x10000, 0x10FFFF, 1},
  };
  int total = 0;
  for (const Range& r : kRanges) total += r.weight;
  int pick = std::uniform_int_distribution<int>(0, total - 1)(rng);
  for (const Range& r : kRanges) {
    if (pick < r.weight) return std::uniform_int_distribution<char32_t>(r.lo, r.hi)(rng);
    pick -= r.weight;
  }
  return 'x';
}

std::string random_unicode(std::mt19937& rng) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 40)(rng);
  for (int i = 0; i < n; ++i) {
    if (std::uniform_int_distribution<int>(0, 60)(rng) == 0) {
      s += "<|endoftext|> ";  // the space keeps NFC from reaching into the token
      continue;
    }
    tok::append_utf8(s, random_code_point(rng));
  }
  return s;
}

std::string random_bytes(std::mt19937& rng) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 48)(rng);
  for (int i = 0; i < n; ++i) {
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
      case 0:  // any byte
        s += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        break;
      case 1:  // a character cut short
        tok::append_utf8(s, random_code_point(rng));
        if (static_cast<unsigned char>(s.back()) >= 0x80) s.pop_back();
        break;
      default:
        tok::append_utf8(s, random_code_point(rng));
    }
  }
  return s;
}

TEST(TokenizerRoundTrip, RandomUnicodeComesBackAsItsNfc) {
  const auto tokenizer = golden();
  std::mt19937 rng(1234);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_unicode(rng);
    ASSERT_EQ(tokenizer->decode(tokenizer->encode(text)), nfc(text)) << Json(text).dump();
  }
}

TEST(TokenizerRoundTrip, RandomUnicodeExactWithoutNormalizer) {
  const auto tokenizer = golden_without_normalizer();
  std::mt19937 rng(99);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_unicode(rng);
    ASSERT_EQ(tokenizer->decode(tokenizer->encode(text)), text) << Json(text).dump();
  }
}

TEST(TokenizerRoundTrip, RandomBytesExactWithoutNormalizer) {
  const auto tokenizer = golden_without_normalizer();
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = random_bytes(rng);
    std::vector<int32_t> ids;
    ASSERT_NO_THROW(ids = tokenizer->encode(bytes));
    ASSERT_EQ(tokenizer->decode(ids), bytes) << testing::PrintToString(bytes);
  }
}

TEST(TokenizerRoundTrip, RandomBytesNormalizeOnlyValidRuns) {
  const auto tokenizer = golden();
  std::mt19937 rng(8);
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = random_bytes(rng);
    ASSERT_EQ(tokenizer->decode(tokenizer->encode(bytes)), nfc_of_bytes(bytes))
        << testing::PrintToString(bytes);
  }
}

TEST(TokenizerRoundTrip, RawBytesTokenizerIsExact) {
  const auto tokenizer = make_raw_bytes_tokenizer();
  std::mt19937 rng(3);
  for (int i = 0; i < 500; ++i) {
    const std::string bytes = random_bytes(rng);
    ASSERT_EQ(tokenizer->decode(tokenizer->encode(bytes)), bytes);
  }
}

TEST(TokenizerRoundTrip, InvalidUtf8IsEncodedByteForByte) {
  const auto tokenizer = golden();
  // Byte 0xFF is spelled "ÿ" and 0xC3 "Ã" in the byte-level alphabet.
  const auto ff = tokenizer->token_to_id("ÿ");
  const auto c3 = tokenizer->token_to_id("Ã");
  ASSERT_TRUE(ff && c3);
  EXPECT_EQ(tokenizer->encode("\xff"), std::vector<int32_t>{*ff});
  const std::vector<int32_t> ids = tokenizer->encode("ab\xc3");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), *c3);
  EXPECT_EQ(tokenizer->decode(ids), "ab\xc3");
}

TEST(TokenizerRoundTrip, NfcMakesCombiningFormsEqual) {
  const auto tokenizer = golden();
  EXPECT_EQ(tokenizer->encode("cafe\xcc\x81"), tokenizer->encode("caf\xc3\xa9"));
}

}  // namespace
}  // namespace ssm
