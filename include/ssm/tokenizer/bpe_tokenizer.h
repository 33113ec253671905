// The HF tokenizer pipeline for BPE: added tokens in raw text,
// normalization, added tokens in normalized text, pre-tokenization, BPE;
// then the post-processor's special tokens on request. Decoding runs the
// file's decoder over the tokens' spellings.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ssm/tokenizer/added_tokens.h"
#include "ssm/tokenizer/bpe_model.h"
#include "ssm/tokenizer/decoder.h"
#include "ssm/tokenizer/normalizer.h"
#include "ssm/tokenizer/post_processor.h"
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
    tok::Decoder decoder;
    tok::PostProcessor post_processor;
    std::vector<std::string> token_strings;              // by id, as spelled; empty where no token
    std::unordered_map<std::string, int32_t> spellings;  // vocab keys and added tokens
  };

  explicit BpeTokenizer(Parts parts);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> add_special_tokens(std::vector<int32_t> ids) const override {
    return post_processor_.apply(std::move(ids));
  }
  std::string_view token_bytes(int32_t id) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  bool is_special(int32_t id) const override;

 protected:
  std::string decode_ids(std::span<const int32_t> ids, bool skip_special) const override;

 private:
  tok::Normalizer normalizer_;
  tok::PreTokenizer pre_tokenizer_;
  std::unique_ptr<tok::BpeModel> model_;
  tok::AddedTokenMatcher raw_matcher_;         // added tokens with normalized = false
  tok::AddedTokenMatcher normalized_matcher_;  // and with normalized = true
  tok::Decoder decoder_;
  tok::PostProcessor post_processor_;
  std::vector<std::string> token_strings_;
  std::vector<std::string> token_bytes_;  // token_strings_ through the decoder, per token
  std::vector<bool> special_;
  std::unordered_map<std::string, int32_t> spellings_;
};

}  // namespace ssm
