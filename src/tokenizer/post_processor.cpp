#include "ssm/tokenizer/post_processor.h"

namespace ssm::tok {

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  if (identity_) return ids;
  std::vector<int32_t> out;
  size_t extra = 0;
  for (const Piece& p : single_) extra += p.ids.size();
  out.reserve(ids.size() + extra);
  for (const Piece& p : single_) {
    if (p.is_text)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), p.ids.begin(), p.ids.end());
  }
  return out;
}

PostProcessor PostProcessor::then(const PostProcessor& next) const {
  if (identity_) return next;
  if (next.identity_) return *this;
  // Substitute this template for every text piece of next's.
  std::vector<Piece> combined;
  for (const Piece& outer : next.single_) {
    if (!outer.is_text) {
      combined.push_back(outer);
      continue;
    }
    combined.insert(combined.end(), single_.begin(), single_.end());
  }
  return PostProcessor(std::move(combined));
}

}  // namespace ssm::tok
