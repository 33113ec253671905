// GPT-2's reversible byte <-> character alphabet. Byte-level BPE vocabularies
// spell every byte with a printable character (space is "Ġ", newline "Ċ"), so
// vocab and merges are read through it; encoding itself works on raw bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ssm::tok {

char32_t byte_to_char(uint8_t byte);

// The byte a character spells, or -1 when it is outside the alphabet.
int char_to_byte(char32_t c);

// The spelling of raw bytes as it appears in a byte-level vocabulary.
std::string to_byte_level(std::string_view bytes);

// The raw bytes of a byte-level spelling; nullopt when it holds a character
// outside the alphabet or is not valid UTF-8.
std::optional<std::string> from_byte_level(std::string_view spelling);

}  // namespace ssm::tok
