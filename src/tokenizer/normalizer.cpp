#include "ssm/tokenizer/normalizer.h"

#include <cstdlib>
#include <utf8proc.h>

#include "ssm/core/error.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

utf8proc_option_t options_of(NormalForm form) {
  const int stable = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: return static_cast<utf8proc_option_t>(stable | UTF8PROC_COMPOSE);
    case NormalForm::kNfd: return static_cast<utf8proc_option_t>(stable | UTF8PROC_DECOMPOSE);
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

void append_normalized(std::string_view valid, utf8proc_option_t options, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                   static_cast<utf8proc_ssize_t>(valid.size()), &result, options);
  // The run was validated with the same rules, so only memory can fail here.
  SSM_CHECK(n >= 0, "utf8proc_map: ", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
}

void normalize_into(std::string_view text, NormalForm form, std::string& out) {
  out.clear();
  out.reserve(text.size() + text.size() / 8);
  const utf8proc_option_t options = options_of(form);
  while (!text.empty()) {
    const size_t valid = valid_utf8_prefix(text);
    if (valid > 0) append_normalized(text.substr(0, valid), options, out);
    text.remove_prefix(valid);
    if (!text.empty()) {
      out += text.front();  // one invalid byte, kept as it is
      text.remove_prefix(1);
    }
  }
}

}  // namespace

std::string_view Normalizer::normalize(std::string_view text, std::string& storage) const {
  std::string scratch;
  std::string_view current = text;
  for (const NormalForm form : forms_) {
    if (form == NormalForm::kNfc && surely_nfc(current)) continue;
    normalize_into(current, form, scratch);
    storage.swap(scratch);
    current = storage;
  }
  return current;
}

}  // namespace ssm::tok
