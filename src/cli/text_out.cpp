#include "cli/text_out.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ssm::cli {

TextOut::TextOut(const Tokenizer& tokenizer, const std::vector<std::string>& stops, std::FILE* out)
    : decoder_(tokenizer), stops_(stops), out_(out) {
  for (const std::string& s : stops) hold_ = std::max(hold_, s.empty() ? 0 : s.size() - 1);
}

size_t TextOut::first_stop() const {
  size_t at = std::string::npos;
  for (const std::string& s : stops_) at = std::min(at, held_.find(s));
  return at;
}

void TextOut::push(int64_t id) {
  if (stopped_) return;
  held_ += decoder_.push(static_cast<int32_t>(id));
  // This token may complete a stop string: the generator stops after it.
  if (const size_t at = first_stop(); at != std::string::npos) {
    emit(at);
    held_.clear();
    stopped_ = true;
    return;
  }
  size_t cut = held_.size() > hold_ ? held_.size() - hold_ : 0;
  while (cut > 0 && cut < held_.size() && (static_cast<unsigned char>(held_[cut]) & 0xC0) == 0x80) --cut;
  emit(cut);
}

void TextOut::finish(bool stopped_by_string) {
  if (!stopped_) {
    held_ += decoder_.finish();
    const size_t at = stopped_by_string ? first_stop() : std::string::npos;
    emit(std::min(at, held_.size()));
    held_.clear();
  }
  if (out_ != nullptr) {
    if (!ends_line() && ::isatty(::fileno(out_))) write("\n", 1);
    std::fflush(out_);
  }
}

void TextOut::echo(const std::string& prompt) { write(prompt.data(), prompt.size()); }

void TextOut::emit(size_t n) {
  if (n == 0) return;
  text_.append(held_, 0, n);
  write(held_.data(), n);
  held_.erase(0, n);
}

void TextOut::write(const char* data, size_t n) {
  if (out_ == nullptr || n == 0 || write_error_ != 0) return;
  errno = 0;
  if (std::fwrite(data, 1, n, out_) != n || std::fflush(out_) != 0) write_error_ = errno != 0 ? errno : EIO;
  printed_ = true;
  last_ = data[n - 1];
}

}  // namespace ssm::cli
