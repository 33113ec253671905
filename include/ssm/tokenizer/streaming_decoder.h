// Decodes tokens as they are generated. A multi-byte character is often
// split over tokens (byte-level BPE cuts "😀" into several, byte fallback
// spells it as four <0xNN> tokens), so output stops before an incomplete
// character and holds it until the next token completes it. Decoders that
// look at neighbours (Strip of the first space, Metaspace's first token,
// ByteFallback's runs) are honoured by decoding a small window: the tokens
// of the last emitted piece as context, then the new ones, and emitting what
// the new ones add. For byte-level BPE the concatenated output (with
// finish()) always equals decode() of all ids, bytes that can never become
// valid UTF-8 included; with byte fallback it does whenever the byte tokens
// form valid UTF-8 (a broken run decodes to U+FFFD per byte as a whole,
// after its valid start may already have been printed).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

  size_t pending_bytes() const { return held_; }

 private:
  std::string take();

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> window_;  // context ids, then ids whose text is not all out
  size_t context_ = 0;           // leading ids of window_ that are context only
  std::string shown_;            // the start of decode(window_) already returned
  size_t held_ = 0;              // bytes of decode(window_) held back
};

}  // namespace ssm
