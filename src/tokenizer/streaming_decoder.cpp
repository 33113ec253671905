#include "ssm/tokenizer/streaming_decoder.h"

#include "ssm/tokenizer/utf8.h"

namespace ssm {

std::string StreamingDecoder::push(int32_t id) {
  if (!(skip_special_ && tokenizer_.is_special(id))) pending_ += tokenizer_.token_bytes(id);
  return take_complete();
}

std::string StreamingDecoder::push(std::span<const int32_t> ids) {
  for (const int32_t id : ids)
    if (!(skip_special_ && tokenizer_.is_special(id))) pending_ += tokenizer_.token_bytes(id);
  return take_complete();
}

std::string StreamingDecoder::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::string StreamingDecoder::take_complete() {
  const size_t keep = tok::incomplete_utf8_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

}  // namespace ssm
