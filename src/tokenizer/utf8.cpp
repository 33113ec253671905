#include "ssm/tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdint>
#include <cstring>

namespace ssm::tok {
namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// What a lead byte promises: total length and the allowed range of the second
// byte, which is where overlongs, surrogates and > U+10FFFF are ruled out.
struct Lead {
  size_t length;  // 0: not a lead byte
  unsigned char second_lo;
  unsigned char second_hi;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Whether the n bytes at p could begin a valid character (n < its length).
bool is_valid_prefix(const unsigned char* p, size_t n) {
  const Lead lead = lead_of(p[0]);
  if (lead.length <= n) return false;
  if (n >= 2 && (p[1] < lead.second_lo || p[1] > lead.second_hi)) return false;
  for (size_t i = 2; i < n; ++i)
    if (!is_continuation(p[i])) return false;
  return true;
}

}  // namespace

Utf8Char decode_utf8(std::string_view s) {
  if (s.empty()) return {};
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const Lead lead = lead_of(p[0]);
  if (lead.length == 0 || lead.length > s.size()) return {};
  if (lead.length == 1) return {p[0], 1};
  if (p[1] < lead.second_lo || p[1] > lead.second_hi) return {};
  char32_t c = p[0] & (0x7F >> lead.length);
  for (size_t i = 1; i < lead.length; ++i) {
    if (!is_continuation(p[i])) return {};
    c = (c << 6) | (p[i] & 0x3F);
  }
  return {c, lead.length};
}

size_t valid_utf8_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII dominates real text: test eight bytes at a time.
    if (i + 8 <= s.size()) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = decode_utf8(s.substr(i)).length;
    if (n == 0) break;
    i += n;
  }
  return i;
}

size_t incomplete_utf8_tail(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t n = 1; n <= 3 && n <= s.size(); ++n) {
    const unsigned char b = p[s.size() - n];
    if (is_continuation(b)) continue;
    return is_valid_prefix(p + s.size() - n, n) ? n : 0;
  }
  return 0;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_unicode_whitespace(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  if (c < 0x80) return false;
  const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

bool is_word_char(char32_t c) {
  if (c == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

}  // namespace ssm::tok
