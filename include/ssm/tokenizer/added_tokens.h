// Added and special tokens (HF "added_tokens"): literal strings found in the
// text before pre-tokenization and emitted as their own ids, so that
// "<|endoftext|>" is one token and not twelve. Matching is leftmost-longest,
// like HF's Aho-Corasick; lstrip/rstrip absorb neighbouring whitespace and
// single_word requires a non-word character (or the text's edge) each side.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;  // matched in normalized text rather than raw text
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  // A piece of text to encode normally (id < 0) or one added token.
  struct Piece {
    std::string_view text;
    int32_t id = -1;
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Appends text's pieces in order; text pieces are never empty.
  void split(std::string_view text, std::vector<Piece>& out) const;

  bool empty() const { return tokens_.empty(); }

 private:
  struct Match {
    size_t begin = 0;
    size_t end = 0;
    int32_t index = -1;  // into tokens_
  };
  Match find(std::string_view text, size_t from) const;
  bool accepts(const AddedToken& token, std::string_view text, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  // Token indices by first byte, longest first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace ssm::tok
