// BPE over token ids: a word starts as one token per byte (byte-level BPE,
// GPT-2 style) or per character (SentencePiece style, where a character
// missing from the vocab falls back to its bytes' <0xNN> tokens, or to the
// unknown token), and the lowest-ranked adjacent pair is merged until no pair
// has a rule.
// Merges run through a min-heap over a linked list of symbols, O(n log n) per
// word, and whole words are cached since text repeats its words constantly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ssm/tokenizer/word_cache.h"

namespace ssm::tok {

struct MergeRule {
  int32_t left = 0;
  int32_t right = 0;
  int32_t merged = 0;
};

// Open-addressing map from an id pair to its merge (rank and result): one
// multiply and usually one probe per lookup.
class PairRanks {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  explicit PairRanks(const std::vector<MergeRule>& rules);

  // nullptr when the pair has no rule.
  const Entry* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t pack(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  int shift_ = 64;
};

class BpeModel {
 public:
  struct Config {
    std::array<int32_t, 256> byte_ids{};  // -1 where the vocab lacks the byte
    std::vector<MergeRule> merges;        // in rank order
    // ignore_merges: a word that is itself a token is emitted whole.
    bool ignore_merges = false;
    std::unordered_map<std::string, int32_t> word_ids;  // raw bytes -> id, for ignore_merges
    int32_t unk_id = -1;  // stands in for bytes missing from the vocab; -1 drops them

    // Character-level start (byte_level = false): the id of each one-character
    // vocab entry, and of each <0xNN> entry for byte_fallback (-1: missing).
    bool byte_level = true;
    std::unordered_map<char32_t, int32_t> char_ids;
    bool byte_fallback = false;
    std::array<int32_t, 256> fallback_ids{};
    bool fuse_unk = false;
  };

  explicit BpeModel(Config config);

  // Appends the ids of one word (raw bytes). Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // A hint that word will be encoded soon.
  void prefetch(std::string_view word) const { cache_.prefetch(word); }

 private:
  void merge(std::string_view word, std::vector<int32_t>& out) const;
  // The starting ids of word (at most one per byte); returns how many.
  int32_t start_bytes(std::string_view word, int32_t* ids) const;
  int32_t start_chars(std::string_view word, int32_t* ids) const;

  Config config_;
  PairRanks ranks_;
  mutable WordCache cache_;
};

}  // namespace ssm::tok
