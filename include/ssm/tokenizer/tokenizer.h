// Text <-> token ids. Two kinds: BPE read from an HF tokenizer.json
// (byte-level like GPT-NeoX's and Llama-3's, or SentencePiece-style with byte
// fallback like Llama-2's and Mistral's), and raw bytes (id = byte value) for
// byte-level models. Decoding follows the file's decoder and never fails;
// StreamingDecoder turns a token stream into whole UTF-8 characters.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Any byte string is accepted: invalid UTF-8 is encoded byte for byte.
  // Without the post-processor's special tokens (HF add_special_tokens=False).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;

  // With them, as HF's default (add_special_tokens=True): "<s>" before a
  // Llama-2 text, "<|begin_of_text|>" before a Llama-3 one.
  std::vector<int32_t> encode_with_special(std::string_view text) const {
    return add_special_tokens(encode(text));
  }
  // The post-processor's template around ids of a text.
  virtual std::vector<int32_t> add_special_tokens(std::vector<int32_t> ids) const { return ids; }

  // The bytes a token stands for inside a text ("▁the" -> " the", "<0x41>"
  // -> "A"); empty for an id that has no token.
  virtual std::string_view token_bytes(int32_t id) const = 0;

  // The id of a token as tokenizer.json spells it ("Ġthe", "<|endoftext|>").
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;

  // One past the largest id.
  virtual int32_t vocab_size() const = 0;

  virtual bool is_special(int32_t id) const = 0;

  // HF's decode of the ids through the file's decoder (for byte-level BPE,
  // the concatenated bytes of the tokens). Ids with no token decode to
  // nothing, as in HF: models pad their vocab beyond the tokenizer's.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const {
    return decode_ids(ids, skip_special);
  }

  bool has_token(int32_t id) const { return !token_bytes(id).empty(); }

 protected:
  // Default: the concatenation of token_bytes.
  virtual std::string decode_ids(std::span<const int32_t> ids, bool skip_special) const;
};

std::unique_ptr<Tokenizer> make_raw_bytes_tokenizer();

// Throws ssm::Error naming source and what is wrong for any malformed or
// unsupported file.
std::unique_ptr<Tokenizer> parse_tokenizer_json(const std::string& text, const std::string& source);
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path);

// path/tokenizer.json for a model directory that has one; the raw-bytes
// tokenizer for one that does not and whose config.json says it is
// byte-level (vocab_size <= 256, or "tokenizer": "bytes"); otherwise
// ssm::Error. A path to a file is read as tokenizer.json.
std::unique_ptr<Tokenizer> load_tokenizer_for_model(const std::filesystem::path& path);

}  // namespace ssm
