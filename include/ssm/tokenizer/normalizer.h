// Unicode normalization ahead of pre-tokenization (HF "normalizer"), through
// utf8proc. Any byte string is accepted: valid UTF-8 runs are normalized and
// invalid bytes pass through untouched, so encoding never throws.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ssm::tok {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

class Normalizer {
 public:
  Normalizer() = default;
  // Forms applied in order (HF "Sequence"); empty: the identity.
  explicit Normalizer(std::vector<NormalForm> forms) : forms_(std::move(forms)) {}

  // The normalized text: a view of text itself when nothing changes (the
  // common case, kept copy-free), otherwise a view of storage.
  std::string_view normalize(std::string_view text, std::string& storage) const;

  bool is_identity() const { return forms_.empty(); }

 private:
  std::vector<NormalForm> forms_;
};

}  // namespace ssm::tok
