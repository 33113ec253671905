// Cuts one normalized segment into pre-tokens (words) that BPE then encodes
// independently: an optional prefix space, then a chain of regex splits (the
// GPT-2 pattern for ByteLevel, or HF "Split" stages). Invalid UTF-8 bytes are
// words of their own, never seen by PCRE2, so any byte string is accepted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ssm/tokenizer/regex.h"

namespace ssm::tok {

class PreTokenizer {
 public:
  PreTokenizer() = default;
  PreTokenizer(bool add_prefix_space, std::vector<Regex> splits)
      : add_prefix_space_(add_prefix_space), splits_(std::move(splits)) {}

  // Appends the words of segment. They view segment or storage, which must
  // outlive them.
  void split(std::string_view segment, std::string& storage,
             std::vector<std::string_view>& words) const;

  bool add_prefix_space() const { return add_prefix_space_; }
  size_t split_count() const { return splits_.size(); }

 private:
  void split_valid(std::string_view text, size_t stage, std::vector<std::string_view>& words,
                   std::vector<std::string_view>& scratch) const;

  bool add_prefix_space_ = false;
  std::vector<Regex> splits_;
};

}  // namespace ssm::tok
