#include "ssm/tokenizer/word_cache.h"

#include <bit>
#include <cstring>

#include "ssm/core/error.h"

namespace ssm::tok {

WordCache::WordCache(size_t sets)
    : tags_(sets), slots_(sets * kWays), shift_(64 - std::countr_zero(sets)) {
  SSM_CHECK(sets >= 2 && std::has_single_bit(sets), "sets must be a power of two");
}

bool WordCache::holds(const Slot& s, std::string_view word) {
  return s.word_bytes == word.size() && std::memcmp(s.word, word.data(), word.size()) == 0;
}

bool WordCache::find(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  const uint64_t h = hash_of(word);
  const size_t set = h >> shift_;
  std::lock_guard lock(mutex_);
  const Tags& tags = tags_[set];
  for (size_t w = 0; w < kWays; ++w) {
    if (tags.hash[w] != h) continue;
    const Slot& s = slots_[set * kWays + w];
    if (!holds(s, word)) continue;
    out.insert(out.end(), s.ids, s.ids + s.id_count);
    return true;
  }
  return false;
}

void WordCache::insert(std::string_view word, const int32_t* ids, size_t count) {
  if (word.size() > kMaxWordBytes || count > kMaxIds) return;
  const uint64_t h = hash_of(word);
  const size_t set = h >> shift_;
  std::lock_guard lock(mutex_);
  Tags& tags = tags_[set];
  // An empty way if there is one, else round-robin: cheap, and close enough
  // to LRU since a hot word that is evicted comes straight back.
  size_t way = victim_++ & (kWays - 1);
  for (size_t w = 0; w < kWays; ++w) {
    if (tags.hash[w] == h && holds(slots_[set * kWays + w], word)) return;  // added meanwhile
    if (tags.hash[w] == 0) {
      way = w;
      break;
    }
  }
  tags.hash[way] = h;
  Slot& s = slots_[set * kWays + way];
  s.word_bytes = static_cast<uint8_t>(word.size());
  s.id_count = static_cast<uint8_t>(count);
  std::memcpy(s.word, word.data(), word.size());
  std::memcpy(s.ids, ids, count * sizeof(int32_t));
}

}  // namespace ssm::tok
