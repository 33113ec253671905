#include "ssm/tokenizer/added_tokens.h"

#include <algorithm>

#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

// The character ending just before `end`, if it decodes.
Utf8Char char_before(std::string_view text, size_t end) {
  for (size_t n = 1; n <= 4 && n <= end; ++n) {
    const Utf8Char c = decode_utf8(text.substr(end - n, n));
    if (c.length == n) return c;
  }
  return {};
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (AddedToken& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

bool AddedTokenMatcher::accepts(const AddedToken& token, std::string_view text, size_t begin,
                                size_t end) const {
  if (!token.single_word) return true;
  const Utf8Char before = char_before(text, begin);
  if (before.length > 0 && is_word_char(before.code_point)) return false;
  const Utf8Char after = decode_utf8(text.substr(end));
  return after.length == 0 || !is_word_char(after.code_point);
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
    for (const uint32_t index : candidates) {
      const AddedToken& t = tokens_[index];
      if (text.compare(pos, t.content.size(), t.content) != 0) continue;
      const size_t end = pos + t.content.size();
      if (!accepts(t, text, pos, end)) continue;
      return {pos, end, static_cast<int32_t>(index)};
    }
  }
  return {text.size(), text.size(), -1};  // no match
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Piece>& out) const {
  size_t done = 0;  // text before this is emitted
  while (done < text.size() && !tokens_.empty()) {
    Match m = find(text, done);
    if (m.index < 0) break;
    const AddedToken& token = tokens_[m.index];
    // Stripped whitespace belongs to the token: it is consumed, not encoded.
    if (token.lstrip) {
      while (m.begin > done) {
        const Utf8Char c = char_before(text, m.begin);
        if (c.length == 0 || !is_unicode_whitespace(c.code_point)) break;
        m.begin -= c.length;
      }
    }
    if (token.rstrip) {
      while (m.end < text.size()) {
        const Utf8Char c = decode_utf8(text.substr(m.end));
        if (c.length == 0 || !is_unicode_whitespace(c.code_point)) break;
        m.end += c.length;
      }
    }
    if (m.begin > done) out.push_back({text.substr(done, m.begin - done), -1});
    out.push_back({{}, token.id});
    done = m.end;
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

}  // namespace ssm::tok
