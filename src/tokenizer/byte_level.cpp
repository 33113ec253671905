#include "ssm/tokenizer/byte_level.h"

#include <array>

#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

// Printable bytes stand for themselves; the other 68 take code points from
// U+0100 upwards in byte order. This is the published GPT-2 construction.
bool is_self_spelled(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 0x200> from_char{};  // every character of the alphabet is < U+0200

  Alphabet() {
    from_char.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = is_self_spelled(b) ? static_cast<char32_t>(b) : next++;
      to_char[b] = c;
      from_char[c] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet kAlphabet;
  return kAlphabet;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return alphabet().to_char[byte]; }

int char_to_byte(char32_t c) { return c < 0x200 ? alphabet().from_char[c] : -1; }

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(b)));
  return out;
}

std::optional<std::string> from_byte_level(std::string_view spelling) {
  std::string out;
  out.reserve(spelling.size());
  while (!spelling.empty()) {
    const Utf8Char ch = decode_utf8(spelling);
    if (ch.length == 0) return std::nullopt;
    const int b = char_to_byte(ch.code_point);
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
    spelling.remove_prefix(ch.length);
  }
  return out;
}

}  // namespace ssm::tok
