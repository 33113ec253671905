// Remembers the ids of recently encoded words. Text repeats its words
// constantly, so most pre-tokens are answered here without merging. The table
// is set-associative like a CPU cache: a word hashes to a set of four
// one-cache-line entries (key and ids inline), and a new word evicts one of
// them. Memory is fixed and a large vocabulary of rare words never flushes
// the common ones wholesale. The sets' hashes live apart, four to a cache
// line, so a lookup reads one small, L2-resident line and then only the entry
// that matches. Words too long to fit are simply not cached.
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace ssm::tok {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 30;
  static constexpr size_t kMaxIds = 8;
  static constexpr size_t kWays = 4;

  // sets: a power of two. The default holds 64K words in 4 MiB.
  explicit WordCache(size_t sets = size_t{1} << 14);

  // Appends the cached ids of word and returns true, or returns false.
  bool find(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t count);

  // Starts loading word's set into the CPU cache. Lookups are bound by memory
  // latency, and the caller knows the next words before it needs them.
  void prefetch(std::string_view word) const {
    if (word.size() > kMaxWordBytes) return;
    const size_t set = hash_of(word) >> shift_;
    __builtin_prefetch(&tags_[set]);
    __builtin_prefetch(&slots_[set * kWays]);
  }

 private:
  struct alignas(64) Slot {
    uint8_t word_bytes = 0;
    uint8_t id_count = 0;
    char word[kMaxWordBytes];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Slot) == 64);

  struct alignas(32) Tags {
    uint64_t hash[kWays] = {};  // 0: empty way
  };

  static uint64_t hash_of(std::string_view word) {
    // FNV-1a, finished with a multiply so that the top bits (the set) mix.
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : word) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
    h *= 0x9E3779B97F4A7C15ULL;
    return h == 0 ? 1 : h;
  }
  static bool holds(const Slot& s, std::string_view word);

  mutable std::mutex mutex_;
  std::vector<Tags> tags_;   // by set
  std::vector<Slot> slots_;  // set * kWays + way
  int shift_;                // set = hash >> shift_
  size_t victim_ = 0;
};

}  // namespace ssm::tok
