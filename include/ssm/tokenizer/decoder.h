// Token strings -> text, as HF's decoders do it (tokenizer.json "decoder").
// Tokens are spelled as the vocab spells them ("▁Hello", "<0xE4>", "Ġthe")
// and each step rewrites the list: Replace (per token), ByteFallback (runs
// of <0xNN> tokens become their UTF-8 text, or one U+FFFD per byte when the
// run is not valid UTF-8), Fuse (one string), Strip (characters at the ends
// of each string), Metaspace ("▁" -> " ", dropped in the first token) and
// ByteLevel (the GPT-2 alphabet back to bytes). The result is the
// concatenation of what is left.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ssm::tok {

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel };
  Kind kind = Kind::kFuse;
  std::string pattern;  // kReplace: the literal; kMetaspace: the replacement character
  std::string content;  // kReplace: what replaces it; kStrip: the character stripped
  size_t start = 0;     // kStrip: at most this many from the left
  size_t stop = 0;      // and from the right
  bool prepend = true;  // kMetaspace: the encoder prepended (prepend scheme not "never")
};

class Decoder {
 public:
  Decoder() = default;
  explicit Decoder(std::vector<DecoderStep> steps);

  // HF's decode of the tokens (each a vocab spelling or an added token).
  std::string decode(const std::vector<std::string_view>& tokens) const;

  // What one token contributes inside a text: its bytes after the per-token
  // steps, with Strip and the first-token rule of Metaspace left out.
  std::string token_bytes(std::string_view token) const;

  // Whether decode is the plain concatenation of token_bytes, so callers may
  // skip building the token list (byte-level vocabularies).
  bool concatenates() const { return concatenates_; }

  bool has_byte_level() const {
    for (const DecoderStep& s : steps_)
      if (s.kind == DecoderStep::Kind::kByteLevel) return true;
    return false;
  }

 private:
  std::vector<DecoderStep> steps_;
  bool concatenates_ = true;
};

// The byte a "<0xNN>" token stands for, or -1 (HF reads NN as a Rust u8,
// in either case).
int byte_fallback_value(std::string_view token);

}  // namespace ssm::tok
