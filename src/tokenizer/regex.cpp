#define PCRE2_CODE_UNIT_WIDTH 8
#include "ssm/tokenizer/regex.h"

#include <pcre2.h>

#include <memory>
#include <utility>

#include "ssm/core/error.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code_ == nullptr)
    throw Error(cat("regex /", pattern, "/: ", pcre2_message(error), " at offset ", offset));
  // Without JIT the interpreter still gives the same results, only slower.
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(code_);
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      code_(std::exchange(other.code_, nullptr)),
      jit_(other.jit_) {}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(code_);
    pattern_ = std::move(other.pattern_);
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
  }
  return *this;
}

void Regex::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  // Only the whole match is needed, so one ovector pair suffices.
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create(1, nullptr));
  SSM_CHECK(data != nullptr, "pcre2_match_data_create failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
  size_t gap_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    // The caller guarantees valid UTF-8; checking again per call would make
    // splitting quadratic in the text length.
    const int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, data.get(), nullptr)
                        : pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                      data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    SSM_CHECK(rc >= 0, "regex /", pattern_, "/: ", pcre2_message(rc));
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end == start) {
      // An empty match splits nothing; step over one character and go on.
      const size_t step = decode_utf8(text.substr(start)).length;
      pos = start + (step == 0 ? 1 : step);
      continue;
    }
    if (start > gap_start) out.push_back(text.substr(gap_start, start - gap_start));
    out.push_back(text.substr(start, end - start));
    gap_start = pos = end;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

}  // namespace ssm::tok
