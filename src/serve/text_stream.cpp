#include "ssm/serve/text_stream.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace ssm::serve {
namespace {

// Bytes at the end of s that begin a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

bool TextStream::push(std::string_view bytes) {
  if (stopped()) return true;
  const size_t old = full_.size();
  full_.append(bytes);
  for (const std::string& s : stops_) {
    const size_t from = old >= s.size() ? old - s.size() + 1 : 0;
    const size_t at = full_.find(s, from);
    if (at != std::string::npos) stop_at_ = std::min(stop_at_, at);
  }
  return stopped();
}

size_t TextStream::ready_end() const {
  if (stopped()) return stop_at_;
  size_t hold = 0;
  // The longest tail of the text that starts some stop string.
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, full_.size()); k > hold; --k)
      if (full_.compare(full_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return full_.size() - std::max(hold, incomplete_utf8_tail(full_));
}

std::string TextStream::take_ready() {
  const size_t e = std::max(ready_end(), taken_);
  std::string out = full_.substr(taken_, e - taken_);
  taken_ = e;
  return out;
}

std::string TextStream::take_rest() {
  const size_t e = std::max(end(), taken_);
  std::string out = full_.substr(taken_, e - taken_);
  taken_ = e;
  return out;
}

std::string json_text(const std::string& bytes) {
  // nlohmann's replacing dump gives the repaired string, quoted.
  const std::string quoted = nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace ssm::serve
