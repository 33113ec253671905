// Cuts one normalized segment into pre-tokens (words) that BPE then encodes
// independently: an optional prefix space, then a chain of regex splits (the
// GPT-2 pattern for ByteLevel, or HF "Split" stages). Invalid UTF-8 bytes are
// words of their own, never seen by PCRE2, so any byte string is accepted.
// Or SentencePiece's Metaspace: spaces become "▁", a "▁" is prepended
// (always, or only to the piece that starts the text), and the text is
// optionally cut before each "▁".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ssm/tokenizer/regex.h"

namespace ssm::tok {

struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement = "\xe2\x96\x81";  // U+2581
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  PreTokenizer(bool add_prefix_space, std::vector<Regex> splits)
      : add_prefix_space_(add_prefix_space), splits_(std::move(splits)) {}
  explicit PreTokenizer(Metaspace metaspace)
      : metaspace_(std::move(metaspace)), is_metaspace_(true) {}

  // Appends the words of segment. They view segment or storage, which must
  // outlive them. at_text_start: the segment begins the encoded text (HF's
  // "first" prepend scheme looks at that).
  void split(std::string_view segment, std::string& storage, std::vector<std::string_view>& words,
             bool at_text_start = true) const;

  bool add_prefix_space() const { return add_prefix_space_; }
  size_t split_count() const { return splits_.size(); }

 private:
  void split_valid(std::string_view text, size_t stage, std::vector<std::string_view>& words,
                   std::vector<std::string_view>& scratch) const;

  void split_metaspace(std::string_view segment, std::string& storage,
                       std::vector<std::string_view>& words, bool at_text_start) const;

  bool add_prefix_space_ = false;
  std::vector<Regex> splits_;
  Metaspace metaspace_;
  bool is_metaspace_ = false;
};

}  // namespace ssm::tok
