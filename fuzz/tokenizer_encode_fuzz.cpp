// encode() of the golden byte-level BPE tokenizer (GPT-NeoX style: NFC,
// GPT-2 split, added tokens) and of the raw-bytes tokenizer on arbitrary
// bytes, with the properties that must hold for every input:
//  - every id is a token of the vocabulary;
//  - decode(encode(x)) == x when x is valid UTF-8 already in NFC (the
//    normalizer is the only lossy step), and always for raw bytes;
//  - streaming decode, token by token, concatenates to decode().
// And of the tokenizer kinds of the HF families (tests/golden/
// tokenizer_kinds): ids valid, the template only adds its tokens around
// them, streaming equals decode for valid UTF-8 (whose byte-fallback runs
// are whole characters), and decode(encode(x)) == x where HF's conversion
// is lossless (Llama-3: always; SentencePiece: no "▁" or "<" in x, and for
// Metaspace no leading space, which its decoder drops).
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

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

void check(const ssm::Tokenizer& tok, const std::string& text, bool lossless, bool stream_exact = true) {
  const std::vector<int32_t> ids = tok.encode(text);
  const std::vector<int32_t> with = tok.encode_with_special(text);
  if (with.size() < ids.size()) std::abort();
  if (!ids.empty() && std::search(with.begin(), with.end(), ids.begin(), ids.end()) == with.end()) std::abort();
  for (const int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size() || !tok.has_token(id)) std::abort();
  const std::string decoded = tok.decode(ids);
  if (lossless && decoded != text) std::abort();
  ssm::StreamingDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (stream_exact && streamed != decoded) std::abort();
}

bool valid_utf8(const std::string& text) { return ssm::tok::valid_utf8_prefix(text) == text.size(); }

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

  static const std::unique_ptr<ssm::Tokenizer> sp_bpe =
      ssm::load_tokenizer_json(SSM_GOLDEN_DIR "/tokenizer_kinds/sp_bpe/tokenizer.json");
  static const std::unique_ptr<ssm::Tokenizer> metaspace =
      ssm::load_tokenizer_json(SSM_GOLDEN_DIR "/tokenizer_kinds/metaspace/tokenizer.json");
  static const std::unique_ptr<ssm::Tokenizer> llama3 =
      ssm::load_tokenizer_json(SSM_GOLDEN_DIR "/tokenizer_kinds/llama3/tokenizer.json");
  const bool valid = valid_utf8(text);
  const bool plain = valid && text.find("\xe2\x96\x81") == std::string::npos && text.find('<') == std::string::npos;
  check(*sp_bpe, text, plain, valid);
  check(*metaspace, text, plain && !text.starts_with(' '), valid);
  check(*llama3, text, true);
  return 0;
}
