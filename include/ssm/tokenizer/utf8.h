// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), the
// same definition PCRE2 and utf8proc use, so that every byte string can be cut
// into runs those libraries accept and single bytes they would reject.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ssm::tok {

struct Utf8Char {
  char32_t code_point = 0;
  size_t length = 0;  // 0: s does not start with a complete, valid character
};

Utf8Char decode_utf8(std::string_view s);

// Bytes of s, from the start, that form valid UTF-8.
size_t valid_utf8_prefix(std::string_view s);

// Length of a trailing incomplete character: bytes that are not yet valid
// but could become so when more bytes arrive (0 to 3).
size_t incomplete_utf8_tail(std::string_view s);

void append_utf8(std::string& out, char32_t code_point);

// Unicode White_Space, as Rust's char::is_whitespace.
bool is_unicode_whitespace(char32_t c);
// Letters, numbers and '_': what bounds a single_word added token.
bool is_word_char(char32_t c);

}  // namespace ssm::tok
