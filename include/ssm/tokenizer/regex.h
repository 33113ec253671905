// A compiled PCRE2 pattern in UTF-8/Unicode mode (PCRE2_UTF | PCRE2_UCP), JIT
// compiled when the library supports it. Patterns are HF's (Oniguruma
// syntax), which PCRE2 accepts for everything byte-level tokenizers use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace ssm::tok {

class Regex {
 public:
  // Throws ssm::Error quoting the pattern and PCRE2's message.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the pieces of valid UTF-8 text: every match and every gap between
  // matches, in order (HF's "Isolated" split behaviour).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

// The GPT-2 split used by the ByteLevel pre-tokenizer when use_regex is set.
// HF's Oniguruma takes \s as Unicode White_Space, which has U+0085 (NEL);
// PCRE2's \s in UCP mode (Z and the ASCII controls) lacks it, so it is added.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\x{85}\p{L}\p{N}]+|)"
    R"([\s\x{85}]+(?![^\s\x{85}])|[\s\x{85}]+)";

}  // namespace ssm::tok
