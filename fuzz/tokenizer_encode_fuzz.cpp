// encode() of the golden byte-level BPE tokenizer (GPT-NeoX style: NFC,
// GPT-2 split, added tokens) and of the raw-bytes tokenizer on arbitrary
// bytes, with the properties that must hold for every input:
//  - every id is a token of the vocabulary;
//  - decode(encode(x)) == x when x is valid UTF-8 already in NFC (the
//    normalizer is the only lossy step), and always for raw bytes;
//  - streaming decode, token by token, concatenates to decode().
#include <utf8proc.h>

#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"

namespace {

// NFC of text, or nullopt when text is not valid UTF-8.
std::optional<std::string> nfc(const std::string& text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return s;
}

void check(const ssm::Tokenizer& tok, const std::string& text, bool lossless) {
  const std::vector<int32_t> ids = tok.encode(text);
  for (const int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size() || !tok.has_token(id)) std::abort();
  const std::string decoded = tok.decode(ids);
  if (lossless && decoded != text) std::abort();
  ssm::StreamingDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != decoded) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  static const std::unique_ptr<ssm::Tokenizer> bpe =
      ssm::load_tokenizer_json(SSM_GOLDEN_DIR "/tokenizer/tokenizer.json");
  static const std::unique_ptr<ssm::Tokenizer> raw = ssm::make_raw_bytes_tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::optional<std::string> normal = nfc(text);
  // NUL cannot be part of a text utf8proc treats as such; keep it out of
  // the round-trip claim.
  check(*bpe, text, normal && *normal == text && text.find('\0') == std::string::npos);
  check(*raw, text, true);
  return 0;
}
