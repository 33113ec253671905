// The special tokens HF puts around an encoded text when add_special_tokens
// is on (tokenizer.json "post_processor"): TemplateProcessing's "single"
// template (Llama's "<s> $A", Llama-3's "<|begin_of_text|> $A"), BERT's and
// RoBERTa's [CLS] $A [SEP], and Sequence of those. ByteLevel adds nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ssm::tok {

class PostProcessor {
 public:
  // One element of the template: the text's own ids, or fixed ids.
  struct Piece {
    bool is_text = false;
    std::vector<int32_t> ids;
  };

  PostProcessor() = default;
  explicit PostProcessor(std::vector<Piece> single) : single_(std::move(single)), identity_(false) {}

  // ids with the template applied (as is without a post-processor).
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;

  // A processor that runs this one and then next (HF's Sequence).
  PostProcessor then(const PostProcessor& next) const;

  bool is_identity() const { return identity_; }

 private:
  std::vector<Piece> single_;
  bool identity_ = true;
};

}  // namespace ssm::tok
