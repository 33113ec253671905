// The HF tokenizer pipeline for byte-level BPE: added tokens in raw text,
// normalization, added tokens in normalized text, pre-tokenization, BPE.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ssm/tokenizer/added_tokens.h"
#include "ssm/tokenizer/bpe_model.h"
#include "ssm/tokenizer/normalizer.h"
#include "ssm/tokenizer/pre_tokenizer.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm {

class BpeTokenizer final : public Tokenizer {
 public:
  // Everything tokenizer.json describes, resolved to ids.
  struct Parts {
    tok::Normalizer normalizer;
    tok::PreTokenizer pre_tokenizer;
    tok::BpeModel::Config model;
    std::vector<tok::AddedToken> added_tokens;
    std::vector<std::string> token_bytes;                // by id; empty where no token
    std::unordered_map<std::string, int32_t> spellings;  // vocab keys and added tokens
  };

  explicit BpeTokenizer(Parts parts);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string_view token_bytes(int32_t id) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  bool is_special(int32_t id) const override;

 private:
  tok::Normalizer normalizer_;
  tok::PreTokenizer pre_tokenizer_;
  std::unique_ptr<tok::BpeModel> model_;
  tok::AddedTokenMatcher raw_matcher_;         // added tokens with normalized = false
  tok::AddedTokenMatcher normalized_matcher_;  // and with normalized = true
  std::vector<std::string> token_bytes_;
  std::vector<bool> special_;
  std::unordered_map<std::string, int32_t> spellings_;
};

}  // namespace ssm
