// Normalization ahead of pre-tokenization (HF "normalizer"): Unicode forms
// through utf8proc, and the two string edits SentencePiece conversions use,
// Prepend ("▁" before every piece) and Replace (" " -> "▁"). Any byte string
// is accepted: valid UTF-8 runs are normalized and invalid bytes pass through
// untouched, so encoding never throws.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ssm::tok {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// One step of a normalizer sequence.
struct NormalizerStep {
  enum class Kind { kForm, kPrepend, kReplace };
  Kind kind = Kind::kForm;
  NormalForm form = NormalForm::kNfc;  // kForm
  std::string pattern;                 // kReplace: the literal replaced
  std::string content;                 // kPrepend: the prefix; kReplace: the replacement

  static NormalizerStep of(NormalForm f) { return {Kind::kForm, f, {}, {}}; }
  static NormalizerStep prepend(std::string prefix) { return {Kind::kPrepend, {}, {}, std::move(prefix)}; }
  static NormalizerStep replace(std::string from, std::string to) {
    return {Kind::kReplace, {}, std::move(from), std::move(to)};
  }
};

class Normalizer {
 public:
  Normalizer() = default;
  // Forms applied in order (HF "Sequence"); empty: the identity.
  explicit Normalizer(std::vector<NormalForm> forms) {
    for (const NormalForm f : forms) steps_.push_back(NormalizerStep::of(f));
  }
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  // The normalized text: a view of text itself when nothing changes (the
  // common case, kept copy-free), otherwise a view of storage.
  std::string_view normalize(std::string_view text, std::string& storage) const;

  bool is_identity() const { return steps_.empty(); }

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace ssm::tok
