// parse_tokenizer_json on arbitrary text: the JSON, normalizers,
// pre-tokenizer steps (user regexes compiled by PCRE2), vocab, merges and
// added tokens. A tokenizer that loads then encodes the input itself.
#include <string>

#include "fuzz_support.h"
#include "ssm/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<ssm::Tokenizer> tok;
  try {
    tok = ssm::parse_tokenizer_json(text, "tokenizer.json");
  } catch (const ssm::Error&) {
    return 0;
  }
  // Encoding never throws ("any byte string is accepted").
  const std::vector<int32_t> ids = tok->encode(std::string_view(text).substr(0, 512));
  for (const int32_t id : ids)
    if (id < 0 || id >= tok->vocab_size()) std::abort();
  (void)tok->decode(ids);
  return 0;
}
