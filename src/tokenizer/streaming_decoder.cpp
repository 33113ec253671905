#include "ssm/tokenizer/streaming_decoder.h"

#include <algorithm>

#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
// A window this long is flushed whatever its end: only garbage (a model
// producing endless broken byte runs) gets here, and decoding stays linear.
constexpr size_t kMaxWindow = 64;

size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

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
  const bool overflow = window_.size() >= kMaxWindow;
  // The new tokens may change how the shown ones decode: a byte-fallback run
  // that continues past a finished character is invalid UTF-8 as a whole
  // until it is finished too. Wait for the text to agree with what is shown.
  if (!text.starts_with(shown_) && !overflow) {
    held_ = text.size();
    return {};
  }
  size_t cut = text.size() - tok::incomplete_utf8_tail(text);
  // An unfinished byte-fallback run decodes to U+FFFD per byte until its
  // last byte arrives.
  if (cut == text.size())
    while (cut >= shown_.size() + kReplacement.size() && std::string_view(text).substr(0, cut).ends_with(kReplacement))
      cut -= kReplacement.size();
  if (overflow) cut = text.size();
  const size_t from = common_prefix(text, shown_);
  std::string out = cut > from ? text.substr(from, cut - from) : std::string();
  if (cut > from) shown_ = text.substr(0, cut);
  held_ = text.size() - std::min(text.size(), shown_.size());
  if (cut == text.size()) {
    // All out: the tokens just printed become the context of the next ones.
    window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
    context_ = window_.size();
    shown_ = tokenizer_.decode(window_, skip_special_);
    held_ = 0;
  }
  return out;
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_.decode(window_, skip_special_);
  const size_t from = common_prefix(text, shown_);
  std::string out = text.substr(from);
  window_.clear();
  context_ = 0;
  shown_.clear();
  held_ = 0;
  return out;
}

}  // namespace ssm
