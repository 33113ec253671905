#include "ssm/tokenizer/bpe_tokenizer.h"

namespace ssm {

BpeTokenizer::BpeTokenizer(Parts parts)
    : normalizer_(std::move(parts.normalizer)),
      pre_tokenizer_(std::move(parts.pre_tokenizer)),
      model_(std::make_unique<tok::BpeModel>(std::move(parts.model))),
      decoder_(std::move(parts.decoder)),
      post_processor_(std::move(parts.post_processor)),
      token_strings_(std::move(parts.token_strings)),
      special_(token_strings_.size(), false),
      spellings_(std::move(parts.spellings)) {
  token_bytes_.reserve(token_strings_.size());
  for (const std::string& s : token_strings_) token_bytes_.push_back(decoder_.token_bytes(s));
  std::vector<tok::AddedToken> raw;
  std::vector<tok::AddedToken> normalized;
  for (tok::AddedToken& t : parts.added_tokens) {
    if (t.id >= 0 && static_cast<size_t>(t.id) < special_.size()) special_[t.id] = t.special;
    if (t.normalized) {
      // HF matches these in normalized text, so their spelling is normalized too.
      std::string storage;
      t.content = std::string(normalizer_.normalize(t.content, storage));
      normalized.push_back(std::move(t));
    } else {
      raw.push_back(std::move(t));
    }
  }
  raw_matcher_ = tok::AddedTokenMatcher(std::move(raw));
  normalized_matcher_ = tok::AddedTokenMatcher(std::move(normalized));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<tok::AddedTokenMatcher::Piece> raw_pieces;
  std::vector<tok::AddedTokenMatcher::Piece> pieces;
  std::vector<std::string_view> words;
  std::string normalized;
  std::string prefixed;
  raw_matcher_.split(text, raw_pieces);
  for (const auto& raw : raw_pieces) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    pieces.clear();
    const std::string_view normal = normalizer_.normalize(raw.text, normalized);
    normalized_matcher_.split(normal, pieces);
    for (const auto& piece : pieces) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      // Metaspace's "first" scheme prepends only to the piece at offset 0.
      const bool at_start = raw.text.data() == text.data() && piece.text.data() == normal.data();
      words.clear();
      pre_tokenizer_.split(piece.text, prefixed, words, at_start);
      constexpr size_t kAhead = 8;
      for (size_t i = 0; i < words.size(); ++i) {
        if (i + kAhead < words.size()) model_->prefetch(words[i + kAhead]);
        model_->encode_word(words[i], ids);
      }
    }
  }
  return ids;
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= token_bytes_.size()) return {};
  return token_bytes_[id];
}

std::string BpeTokenizer::decode_ids(std::span<const int32_t> ids, bool skip_special) const {
  if (decoder_.concatenates()) return Tokenizer::decode_ids(ids, skip_special);
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= token_strings_.size() || token_strings_[id].empty()) continue;
    if (skip_special && special_[id]) continue;
    tokens.push_back(token_strings_[id]);
  }
  return decoder_.decode(tokens);
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = spellings_.find(std::string(token));
  if (it == spellings_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

}  // namespace ssm
