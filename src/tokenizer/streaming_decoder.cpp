#include "ssm/tokenizer/streaming_decoder.h"

#include <algorithm>

#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
// A window this long is flushed whatever its end: only garbage (a model
// producing endless broken byte runs) gets here, and decoding stays linear.
constexpr size_t kMaxWindow = 64;

}  // namespace

std::string StreamingDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  window_.push_back(id);
  return take();
}

std::string StreamingDecoder::push(std::span<const int32_t> ids) {
  std::string out;
  for (const int32_t id : ids) out += push(id);
  return out;
}

std::string StreamingDecoder::take() {
  const std::string text = tokenizer_.decode(window_, skip_special_);
  size_t cut = text.size() - tok::incomplete_utf8_tail(text);
  // An unfinished byte-fallback run decodes to U+FFFD per byte until its
  // last byte arrives.
  if (cut == text.size())
    while (cut >= emitted_ + kReplacement.size() &&
           std::string_view(text).substr(0, cut).ends_with(kReplacement))
      cut -= kReplacement.size();
  if (window_.size() >= kMaxWindow) cut = text.size();
  std::string out;
  if (cut > emitted_) {
    out = text.substr(emitted_, cut - emitted_);
    emitted_ = cut;
  }
  held_ = text.size() > emitted_ ? text.size() - emitted_ : 0;
  if (cut == text.size()) {
    // All out: the tokens just printed become the context of the next ones.
    window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
    context_ = window_.size();
    emitted_ = tokenizer_.decode(window_, skip_special_).size();
    held_ = 0;
  }
  return out;
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_.decode(window_, skip_special_);
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  window_.clear();
  context_ = 0;
  emitted_ = 0;
  held_ = 0;
  return out;
}

}  // namespace ssm
