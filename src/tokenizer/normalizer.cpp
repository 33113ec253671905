#include "ssm/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <vector>

#include "ssm/core/error.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

utf8proc_option_t options_of(NormalForm form) {
  const int stable = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_COMPOSE);
    case NormalForm::kNfd:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_DECOMPOSE);
    case NormalForm::kNfkc:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case NormalForm::kNfkd:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return static_cast<utf8proc_option_t>(stable);
}

// Below U+0300 there are no combining marks and no character that NFC
// changes, so text whose bytes all lie below 0xCC is already in NFC.
bool surely_nfc(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  return true;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Runs utf8proc's decompose + recompose (what utf8proc_map does) in a buffer
// reused across calls instead of two mallocs per call.
class Utf8procRunner {
 public:
  explicit Utf8procRunner(utf8proc_option_t options) : options_(options) {}

  void append(std::string_view valid, std::string& out) {
    const auto* src = reinterpret_cast<const utf8proc_uint8_t*>(valid.data());
    const auto length = static_cast<utf8proc_ssize_t>(valid.size());
    if (buffer_.size() < valid.size() * 2 + 16) buffer_.resize(valid.size() * 2 + 16);
    utf8proc_ssize_t n;
    while (true) {
      // One slot is left free: reencode may write a terminating NUL.
      n = utf8proc_decompose(src, length, buffer_.data(),
                             static_cast<utf8proc_ssize_t>(buffer_.size()) - 1, options_);
      // The run was validated with the same rules, so only memory can fail.
      SSM_CHECK(n >= 0, "utf8proc_decompose: ", utf8proc_errmsg(n));
      if (static_cast<size_t>(n) < buffer_.size()) break;
      buffer_.resize(static_cast<size_t>(n) + 1);
    }
    n = utf8proc_reencode(buffer_.data(), n, options_);
    SSM_CHECK(n >= 0, "utf8proc_reencode: ", utf8proc_errmsg(n));
    out.append(reinterpret_cast<const char*>(buffer_.data()), static_cast<size_t>(n));
  }

 private:
  utf8proc_option_t options_;
  std::vector<utf8proc_int32_t> buffer_;
};

// NFC only where it can change something. A character below U+0300 is a
// starter that NFC leaves alone and that never composes with what precedes
// it, so NFC(text) is the concatenation of NFC over pieces cut before such
// characters. Only the pieces holding a character >= U+0300 (with the starter
// before it, which may absorb it) go through utf8proc; English text skips it
// almost entirely.
void append_nfc(std::string_view valid, Utf8procRunner& runner, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(valid.data());
  const size_t n = valid.size();
  size_t done = 0;
  while (done < n) {
    size_t high = done;
    while (high < n && p[high] < 0xCC) ++high;
    if (high == n) break;
    size_t start = high;
    if (start > done) {
      --start;
      while (start > done && is_continuation(p[start])) --start;
    }
    size_t end = high;
    while (end < n && (p[end] >= 0xCC || is_continuation(p[end]))) ++end;
    out.append(valid.substr(done, start - done));
    runner.append(valid.substr(start, end - start), out);
    done = end;
  }
  out.append(valid.substr(done));
}

void normalize_into(std::string_view text, NormalForm form, std::string& out) {
  out.clear();
  out.reserve(text.size() + text.size() / 8);
  Utf8procRunner runner(options_of(form));
  while (!text.empty()) {
    const size_t valid = valid_utf8_prefix(text);
    if (form == NormalForm::kNfc)
      append_nfc(text.substr(0, valid), runner, out);
    else if (valid > 0)
      runner.append(text.substr(0, valid), out);
    text.remove_prefix(valid);
    if (!text.empty()) {
      out += text.front();  // one invalid byte, kept as it is
      text.remove_prefix(1);
    }
  }
}

// HF's Replace with a String pattern: every non-overlapping occurrence, left
// to right. An empty pattern replaces nothing.
void replace_into(std::string_view text, const std::string& from, const std::string& to,
                  std::string& out) {
  out.clear();
  size_t done = 0;
  for (size_t at; !from.empty() && (at = text.find(from, done)) != std::string_view::npos;
       done = at + from.size()) {
    out.append(text.substr(done, at - done));
    out.append(to);
  }
  out.append(text.substr(done));
}

}  // namespace

std::string_view Normalizer::normalize(std::string_view text, std::string& storage) const {
  std::string scratch;
  std::string_view current = text;
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kForm:
        if (step.form == NormalForm::kNfc && surely_nfc(current)) continue;
        normalize_into(current, step.form, scratch);
        break;
      case NormalizerStep::Kind::kPrepend:
        if (current.empty()) continue;  // HF leaves empty text empty
        scratch.assign(step.content);
        scratch.append(current);
        break;
      case NormalizerStep::Kind::kReplace:
        if (step.pattern.empty() || current.find(step.pattern) == std::string_view::npos) continue;
        replace_into(current, step.pattern, step.content, scratch);
        break;
    }
    storage.swap(scratch);
    current = storage;
  }
  return current;
}

}  // namespace ssm::tok
