#include "ssm/tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <functional>

#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {

PairRanks::PairRanks(const std::vector<MergeRule>& rules) {
  size_t capacity = 16;
  while (capacity < rules.size() * 2) capacity *= 2;
  table_.assign(capacity, Entry{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (size_t rank = 0; rank < rules.size(); ++rank) {
    const MergeRule& r = rules[rank];
    const uint64_t key = pack(r.left, r.right);
    size_t i = slot(key);
    while (table_[i].key != kEmpty && table_[i].key != key) i = (i + 1) & mask_;
    // A repeated pair takes its last rank, as in HF and GPT-2 (a map filled
    // in file order).
    table_[i] = Entry{key, static_cast<int32_t>(rank), r.merged};
  }
}

BpeModel::BpeModel(Config config) : config_(std::move(config)), ranks_(config_.merges) {}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1 && config_.byte_level) {
    const int32_t id = config_.byte_ids[static_cast<uint8_t>(word[0])];
    if (id >= 0)
      out.push_back(id);
    else if (config_.unk_id >= 0)
      out.push_back(config_.unk_id);
    return;
  }
  if (config_.ignore_merges) {
    if (auto it = config_.word_ids.find(std::string(word)); it != config_.word_ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (cache_.find(word, out)) return;
  const size_t first = out.size();
  merge(word, out);
  cache_.insert(word, out.data() + first, out.size() - first);
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;  // -1 at either end
};

// Merges symbols[0..n) in place; heap needs room for 3n entries (n - 1 initial
// candidates plus at most two per merge).
void merge_symbols(const PairRanks& ranks, Symbol* symbols, int32_t n, uint64_t* heap) {
  // Candidates pack (rank, position) so that the smallest is the best merge,
  // leftmost among equal ranks. Entries go stale as neighbours merge; a stale
  // one is recognised on pop because its pair no longer has that rank (a rank
  // names exactly one pair).
  size_t size = 0;
  auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const PairRanks::Entry* e = ranks.find(symbols[pos].id, symbols[next].id);
    if (e == nullptr) return;
    heap[size++] = (uint64_t{static_cast<uint32_t>(e->rank)} << 32) | static_cast<uint32_t>(pos);
    std::push_heap(heap, heap + size, std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (size > 0) {
    std::pop_heap(heap, heap + size, std::greater<>{});
    const uint64_t top = heap[--size];
    const auto rank = static_cast<int32_t>(top >> 32);
    const auto pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    Symbol& left = symbols[pos];
    if (left.id < 0 || left.next < 0) continue;
    const PairRanks::Entry* e = ranks.find(left.id, symbols[left.next].id);
    if (e == nullptr || e->rank != rank) continue;
    Symbol& right = symbols[left.next];
    left.id = e->merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pos;
    right.id = -1;
    if (left.prev >= 0) push(left.prev);
    push(pos);
  }
}

}  // namespace

void BpeModel::merge(std::string_view word, std::vector<int32_t>& out) const {
  // Most words fit on the stack; only long ones pay for allocations.
  constexpr size_t kStackBytes = 64;
  std::array<Symbol, kStackBytes> stack_symbols;
  std::array<uint64_t, 3 * kStackBytes> stack_heap;
  std::vector<Symbol> heap_symbols;
  std::vector<uint64_t> heap_heap;
  Symbol* symbols = stack_symbols.data();
  uint64_t* heap = stack_heap.data();
  if (word.size() > kStackBytes) {
    heap_symbols.resize(word.size());
    heap_heap.resize(3 * word.size());
    symbols = heap_symbols.data();
    heap = heap_heap.data();
  }
  // The start ids go into the symbols' id fields first, then get linked.
  std::vector<int32_t> start_heap;
  std::array<int32_t, kStackBytes> start_stack;
  int32_t* start = start_stack.data();
  if (word.size() > kStackBytes) {
    start_heap.resize(word.size());
    start = start_heap.data();
  }
  const int32_t n = config_.byte_level ? start_bytes(word, start) : start_chars(word, start);
  for (int32_t i = 0; i < n; ++i) symbols[i] = {start[i], i - 1, i + 1 < n ? i + 1 : -1};
  merge_symbols(ranks_, symbols, n, heap);
  for (int32_t i = n == 0 ? -1 : 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

int32_t BpeModel::start_bytes(std::string_view word, int32_t* ids) const {
  int32_t n = 0;
  for (const char c : word) {
    int32_t id = config_.byte_ids[static_cast<uint8_t>(c)];
    if (id < 0) id = config_.unk_id;
    if (id < 0) continue;  // as HF without an unk token: the byte is dropped
    ids[n++] = id;
  }
  return n;
}

// HF's BPE start for a non-byte-level vocab: each character's own token,
// else (byte_fallback) one <0xNN> token per byte when all of them exist,
// else the unknown token, consecutive ones fused into one with fuse_unk.
// Invalid UTF-8 bytes (HF never sees them) count as one-byte characters
// that no vocab entry spells.
int32_t BpeModel::start_chars(std::string_view word, int32_t* ids) const {
  int32_t n = 0;
  bool unk_pending = false;  // HF holds an unknown back to fuse it with the next
  auto flush_unk = [&] {
    if (unk_pending) ids[n++] = config_.unk_id;
    unk_pending = false;
  };
  while (!word.empty()) {
    const Utf8Char ch = decode_utf8(word);
    const size_t length = ch.length == 0 ? 1 : ch.length;
    if (ch.length > 0) {
      const auto it = config_.char_ids.find(ch.code_point);
      if (it != config_.char_ids.end()) {
        flush_unk();
        ids[n++] = it->second;
        word.remove_prefix(length);
        continue;
      }
    }
    bool all_bytes = config_.byte_fallback;
    for (size_t i = 0; all_bytes && i < length; ++i)
      all_bytes = config_.fallback_ids[static_cast<uint8_t>(word[i])] >= 0;
    if (all_bytes) {
      // As HF: a held unknown stays held across byte tokens.
      for (size_t i = 0; i < length; ++i) ids[n++] = config_.fallback_ids[static_cast<uint8_t>(word[i])];
    } else if (config_.unk_id >= 0) {
      if (unk_pending && !config_.fuse_unk) ids[n++] = config_.unk_id;
      unk_pending = true;
    }
    word.remove_prefix(length);
  }
  flush_unk();
  return n;
}

}  // namespace ssm::tok
