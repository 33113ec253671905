// Decodes tokens as they are generated. A multi-byte character is often
// split over tokens (byte-level BPE cuts "😀" into several), so output stops
// before an incomplete UTF-8 tail and holds it until the next token completes
// it. Bytes that can never become valid UTF-8 are passed on as they are, so
// the concatenated output (with finish()) always equals decode() of all ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ssm/tokenizer/tokenizer.h"

namespace ssm {

class StreamingDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // The text that id completes; empty while a character is incomplete.
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);

  // Whatever is held back (an incomplete character at the end of the stream).
  std::string finish();

  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take_complete();

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace ssm
