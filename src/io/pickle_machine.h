// The restricted unpickler's machine: a value stack, a memo and a mark
// stack over an arena of plain values. Private to src/io; pickle.h is the
// interface.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ssm/io/pickle.h"

namespace ssm::pickle_vm {

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};
enum class Callable : uint8_t { kOrderedDict, kRebuildTensor, kRebuildParameter, kStorageType };

const char* kind_name(Kind k);
// Text from the file, made safe to print.
std::string printable(std::string_view s);

// Values live in one arena and refer to each other by index, so that shared
// and even cyclic references (BINGET of a container into itself) cost nothing
// and destruction never recurses.
struct Value {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kOrderedDict;  // kGlobal
  DType dtype = DType::kF32;                   // kGlobal of a storage class
  int64_t number = 0;           // kInt, kBool; kStorage, kTensor: index into the side tables
  std::string text;             // kString; kGlobal: "module.name"
  std::vector<uint32_t> items;  // kTuple, kList; kDict: key, value, key, value, ...
};

struct TensorValue {
  uint32_t storage;
  int64_t offset;
  Shape shape;
  Shape stride;
};

class Machine {
 public:
  Machine(std::string_view in, const std::string& where) : in_(in), where_(where) {
    // Shared immutable singletons: None, False, True, ().
    values_.push_back(Value{Kind::kNone});
    values_.push_back(Value{Kind::kBool});
    values_.push_back(Value{Kind::kBool, Callable::kOrderedDict, DType::kF32, 1});
    values_.push_back(Value{Kind::kTuple});
  }

  uint32_t run();
  const Value& at(uint32_t id) const { return values_[id]; }
  const TensorValue& tensor(const Value& v) const {
    return tensors_[static_cast<size_t>(v.number)];
  }
  const TorchStorageRef& storage(uint32_t index) const { return storages_[index]; }

 private:
  static constexpr uint32_t kNoneId = 0, kFalseId = 1, kTrueId = 2, kEmptyTupleId = 3;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(cat(where_, ": byte ", op_pos_, ": ", what));
  }
  std::string_view take(size_t n) {
    if (n > in_.size() - pos_) fail("truncated pickle");
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t le(size_t n) {
    const std::string_view s = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }
  std::string_view line() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > 256) fail("GLOBAL name is not a short line");
    const std::string_view s = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  uint32_t make(Value v) {
    if (values_.size() >= kMaxPickleValues) fail(cat("more than ", kMaxPickleValues, " values"));
    values_.push_back(std::move(v));
    return static_cast<uint32_t>(values_.size() - 1);
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= base()) fail("stack underflow");
    const uint32_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  uint32_t top() const {
    if (stack_.size() <= base()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<uint32_t> pop_to_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()),
                                stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value& expect(uint32_t id, Kind kind, const char* what) {
    if (values_[id].kind != kind)
      fail(cat(what, " must be a ", kind_name(kind), ", not a ", kind_name(values_[id].kind)));
    return values_[id];
  }

  void global();
  void reduce();
  uint32_t rebuild_tensor(const std::vector<uint32_t>& args);
  void persistent_id();
  void set_items(const std::vector<uint32_t>& kv);

  std::string_view in_;
  std::string where_;
  size_t pos_ = 0, op_pos_ = 0;
  std::vector<Value> values_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  std::vector<TorchStorageRef> storages_;
  std::map<std::string, uint32_t> storage_by_key_;
  std::vector<TensorValue> tensors_;
};

}  // namespace ssm::pickle_vm
