#include "ssm/tokenizer/pre_tokenizer.h"

#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {

void PreTokenizer::split(std::string_view segment, std::string& storage,
                         std::vector<std::string_view>& words, bool at_text_start) const {
  if (segment.empty()) return;
  if (is_metaspace_) {
    split_metaspace(segment, storage, words, at_text_start);
    return;
  }
  // HF prepends the space to every segment between added tokens, testing
  // for an ASCII space only.
  if (add_prefix_space_ && segment.front() != ' ') {
    storage.assign(1, ' ');
    storage.append(segment);
    segment = storage;
  }
  std::vector<std::string_view> scratch;
  while (!segment.empty()) {
    const size_t valid = valid_utf8_prefix(segment);
    if (valid > 0) split_valid(segment.substr(0, valid), 0, words, scratch);
    segment.remove_prefix(valid);
    size_t invalid = 0;
    while (invalid < segment.size() && decode_utf8(segment.substr(invalid)).length == 0) ++invalid;
    if (invalid > 0) words.push_back(segment.substr(0, invalid));
    segment.remove_prefix(invalid);
  }
}

void PreTokenizer::split_metaspace(std::string_view segment, std::string& storage,
                                  std::vector<std::string_view>& words, bool at_text_start) const {
  const std::string& mark = metaspace_.replacement;
  storage.clear();
  storage.reserve(segment.size() + mark.size() * 2);
  for (const char c : segment) {
    if (c == ' ')
      storage += mark;
    else
      storage += c;
  }
  const bool wants_prefix = metaspace_.prepend == Metaspace::Prepend::kAlways ||
                            (metaspace_.prepend == Metaspace::Prepend::kFirst && at_text_start);
  if (wants_prefix && !storage.starts_with(mark)) storage.insert(0, mark);
  const std::string_view text = storage;
  if (!metaspace_.split || mark.empty()) {
    words.push_back(text);
    return;
  }
  // Cut before every mark: each word but the first starts with one (HF's
  // MergedWithNext).
  size_t begin = 0;
  for (size_t at = text.find(mark, 1); at != std::string_view::npos; at = text.find(mark, at + 1)) {
    if (at > begin) words.push_back(text.substr(begin, at - begin));
    begin = at;
  }
  if (begin < text.size()) words.push_back(text.substr(begin));
}

void PreTokenizer::split_valid(std::string_view text, size_t stage,
                               std::vector<std::string_view>& words,
                               std::vector<std::string_view>& scratch) const {
  if (stage == splits_.size()) {
    words.push_back(text);
    return;
  }
  if (stage + 1 == splits_.size()) {
    splits_[stage].split(text, words);  // the usual single stage: no copying
    return;
  }
  const size_t first = scratch.size();
  splits_[stage].split(text, scratch);
  const size_t last = scratch.size();
  for (size_t i = first; i < last; ++i) split_valid(scratch[i], stage + 1, words, scratch);
  scratch.resize(first);
}

}  // namespace ssm::tok
