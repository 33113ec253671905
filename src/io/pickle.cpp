#include "ssm/io/pickle.h"

#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace ssm {
namespace {

enum class Kind : uint8_t { kNone, kBool, kInt, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
enum class Callable : uint8_t { kOrderedDict, kRebuildTensor, kRebuildParameter, kStorageType };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kString: return "str";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kGlobal: return "global";
    case Kind::kStorage: return "storage";
    case Kind::kTensor: return "tensor";
  }
  return "?";
}

// Values live in one arena and refer to each other by index, so that shared
// and even cyclic references (BINGET of a container into itself) cost nothing
// and destruction never recurses.
struct Value {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kOrderedDict;  // kGlobal
  DType dtype = DType::kF32;                   // kGlobal of a storage class
  int64_t number = 0;          // kInt, kBool; kStorage, kTensor: index into the side tables
  std::string text;            // kString; kGlobal: "module.name"
  std::vector<uint32_t> items;  // kTuple, kList; kDict: key, value, key, value, ...
};

struct TensorValue {
  uint32_t storage;
  int64_t offset;
  Shape shape;
  std::vector<int64_t> stride;
};

struct AllowedGlobal {
  std::string_view module, name;
  Callable callable;
  std::optional<DType> dtype;  // storage classes the engine can hold
};

constexpr std::array kAllowedGlobals = {
    AllowedGlobal{"collections", "OrderedDict", Callable::kOrderedDict, std::nullopt},
    AllowedGlobal{"torch._utils", "_rebuild_tensor_v2", Callable::kRebuildTensor, std::nullopt},
    AllowedGlobal{"torch._utils", "_rebuild_parameter", Callable::kRebuildParameter, std::nullopt},
    AllowedGlobal{"torch", "FloatStorage", Callable::kStorageType, DType::kF32},
    AllowedGlobal{"torch", "HalfStorage", Callable::kStorageType, DType::kF16},
    AllowedGlobal{"torch", "BFloat16Storage", Callable::kStorageType, DType::kBF16},
    AllowedGlobal{"torch", "IntStorage", Callable::kStorageType, DType::kI32},
    AllowedGlobal{"torch", "LongStorage", Callable::kStorageType, DType::kI64},
};
// Storage classes torch writes that have no engine dtype: refused by name.
constexpr std::array<std::string_view, 8> kUnsupportedStorages = {
    "DoubleStorage", "ByteStorage", "CharStorage", "ShortStorage",
    "BoolStorage", "ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage"};

// Every pickle opcode by name, so that a refused one is named in the error.
std::string opcode_name(uint8_t op) {
  static const std::map<uint8_t, const char*> kNames = {
      {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
      {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
      {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"},
      {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
      {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
      {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"},
      {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
      {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
      {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"},
      {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"},
      {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"},
      {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
      {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
      {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
  const auto it = kNames.find(op);
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  return it == kNames.end() ? cat("unknown opcode ", hex) : cat("opcode ", it->second, " (", hex, ")");
}

// Text from the file, made safe to print.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 80 ? out + "..." : out;
}

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
  const TensorValue& tensor(const Value& v) const { return tensors_[static_cast<size_t>(v.number)]; }
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
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()), stack_.end());
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

void Machine::global() {
  const std::string module(line()), name(line());
  for (const AllowedGlobal& g : kAllowedGlobals) {
    if (g.module == module && g.name == name) {
      stack_.push_back(make(Value{Kind::kGlobal, g.callable, g.dtype.value_or(DType::kF32), 0,
                                  cat(module, ".", name)}));
      return;
    }
  }
  for (std::string_view s : kUnsupportedStorages)
    if (module == "torch" && name == s)
      fail(cat("storage class torch.", name, " has no engine dtype (supported: FloatStorage, "
               "HalfStorage, BFloat16Storage, IntStorage, LongStorage)"));
  fail(cat("global '", printable(module), ".", printable(name),
           "' is not allowed: a state dict needs only collections.OrderedDict, "
           "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and torch storage "
           "classes"));
}

void Machine::persistent_id() {
  const uint32_t pid = pop();
  const std::vector<uint32_t> f = expect(pid, Kind::kTuple, "persistent id").items;
  if (f.size() != 5 || at(f[0]).kind != Kind::kString || at(f[0]).text != "storage")
    fail("persistent id must be ('storage', type, key, location, numel)");
  const Value& type_value = expect(f[1], Kind::kGlobal, "storage type");
  if (type_value.callable != Callable::kStorageType)
    fail(cat(type_value.text, " is not a storage class"));
  const DType dtype = type_value.dtype;
  const std::string& key = expect(f[2], Kind::kString, "storage key").text;
  if (key.empty() || key.size() > 64 ||
      key.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") !=
          std::string::npos)
    fail(cat("storage key '", printable(key), "' is not a plain name"));
  const std::string& location = expect(f[3], Kind::kString, "storage location").text;
  const int64_t numel = expect(f[4], Kind::kInt, "storage size").number;
  if (numel < 0 || static_cast<uint64_t>(numel) >
                       static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dtype_size(dtype))
    fail(cat("storage '", key, "' declares an impossible size of ", numel, " elements"));
  const auto [it, fresh] = storage_by_key_.emplace(key, static_cast<uint32_t>(storages_.size()));
  if (fresh) {
    storages_.push_back(TorchStorageRef{key, dtype, numel, location});
  } else if (storages_[it->second].dtype != dtype || storages_[it->second].numel != numel) {
    fail(cat("storage '", key, "' is declared twice with different types or sizes"));
  }
  stack_.push_back(make(Value{Kind::kStorage, Callable::kOrderedDict, dtype, it->second}));
}

uint32_t Machine::rebuild_tensor(const std::vector<uint32_t>& args) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (args.size() != 6 && args.size() != 7)
    fail(cat("_rebuild_tensor_v2 takes 6 or 7 arguments, got ", args.size()));
  TensorValue t;
  t.storage = static_cast<uint32_t>(expect(args[0], Kind::kStorage, "tensor storage").number);
  t.offset = expect(args[1], Kind::kInt, "storage offset").number;
  if (t.offset < 0) fail(cat("negative storage offset ", t.offset));
  const std::vector<uint32_t>& size = expect(args[2], Kind::kTuple, "tensor size").items;
  const std::vector<uint32_t>& stride = expect(args[3], Kind::kTuple, "tensor stride").items;
  if (size.size() != stride.size() || size.size() > 64)
    fail(cat("tensor size has ", size.size(), " dimensions and stride ", stride.size()));
  for (size_t i = 0; i < size.size(); ++i) {
    t.shape.push_back(expect(size[i], Kind::kInt, "tensor dimension").number);
    t.stride.push_back(expect(stride[i], Kind::kInt, "tensor stride").number);
  }
  expect(args[4], Kind::kBool, "requires_grad");
  expect(args[5], Kind::kDict, "backward_hooks");
  if (args.size() == 7 && at(args[6]).kind != Kind::kNone && at(args[6]).kind != Kind::kDict)
    fail("tensor metadata must be None or a dict");
  try {
    shape_numel(t.shape);
  } catch (const Error& e) {
    fail(e.what());
  }
  tensors_.push_back(std::move(t));
  return make(Value{Kind::kTensor, Callable::kOrderedDict, DType::kF32,
                    static_cast<int64_t>(tensors_.size() - 1)});
}

void Machine::reduce() {
  const uint32_t args_id = pop();
  const Value& global = expect(pop(), Kind::kGlobal, "REDUCE callable");
  const Callable callable = global.callable;
  const std::string name = global.text;
  const std::vector<uint32_t> args = expect(args_id, Kind::kTuple, "REDUCE arguments").items;
  switch (callable) {
    case Callable::kOrderedDict:
      if (!args.empty()) fail("OrderedDict is only built empty");
      stack_.push_back(make(Value{Kind::kDict}));
      return;
    case Callable::kRebuildTensor:
      stack_.push_back(rebuild_tensor(args));
      return;
    case Callable::kRebuildParameter:
      // (data, requires_grad, backward_hooks): the parameter is its data.
      if (args.size() != 3) fail(cat("_rebuild_parameter takes 3 arguments, got ", args.size()));
      expect(args[0], Kind::kTensor, "parameter data");
      expect(args[1], Kind::kBool, "requires_grad");
      expect(args[2], Kind::kDict, "backward_hooks");
      stack_.push_back(args[0]);
      return;
    case Callable::kStorageType:
      fail(cat(name, " cannot be called"));
  }
}

void Machine::set_items(const std::vector<uint32_t>& kv) {
  if (kv.size() % 2 != 0) fail("SETITEMS needs key-value pairs");
  const uint32_t dict = top();
  expect(dict, Kind::kDict, "SETITEM target");
  for (size_t i = 0; i < kv.size(); i += 2) {
    const Kind k = at(kv[i]).kind;
    if (k == Kind::kList || k == Kind::kDict) fail(cat("a ", kind_name(k), " cannot be a dict key"));
  }
  std::vector<uint32_t>& items = values_[dict].items;
  items.insert(items.end(), kv.begin(), kv.end());
}

uint32_t Machine::run() {
  while (true) {
    op_pos_ = pos_;
    if (pos_ >= in_.size()) fail("truncated pickle: no STOP");
    const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t proto = le(1);
        if (proto > 2) fail(cat("pickle protocol ", proto, " is not supported (torch.save writes 2)"));
        break;
      }
      case '.': {  // STOP
        if (stack_.size() != 1 || !marks_.empty()) fail("STOP with a stack of other than one value");
        return stack_.back();
      }
      case '(': marks_.push_back(stack_.size()); break;
      case '}': stack_.push_back(make(Value{Kind::kDict})); break;
      case ']': stack_.push_back(make(Value{Kind::kList})); break;
      case ')': stack_.push_back(kEmptyTupleId); break;
      case 'N': stack_.push_back(kNoneId); break;
      case 0x88: stack_.push_back(kTrueId); break;
      case 0x89: stack_.push_back(kFalseId); break;
      case 'K': stack_.push_back(make(Value{Kind::kInt, {}, {}, static_cast<int64_t>(le(1))})); break;
      case 'M': stack_.push_back(make(Value{Kind::kInt, {}, {}, static_cast<int64_t>(le(2))})); break;
      case 'J': {
        const int64_t v = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        stack_.push_back(make(Value{Kind::kInt, {}, {}, v}));
        break;
      }
      case 0x8a: {  // LONG1: n little-endian two's-complement bytes
        const size_t n = le(1);
        if (n > 8) fail(cat("LONG1 of ", n, " bytes does not fit 64 bits"));
        uint64_t v = le(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        stack_.push_back(make(Value{Kind::kInt, {}, {}, static_cast<int64_t>(v)}));
        break;
      }
      case 'X': {
        const size_t n = le(4);
        stack_.push_back(make(Value{Kind::kString, {}, {}, 0, std::string(take(n))}));
        break;
      }
      case 'q': memo_[static_cast<uint32_t>(le(1))] = top(); break;
      case 'r': memo_[static_cast<uint32_t>(le(4))] = top(); break;
      case 'h':
      case 'j': {
        const auto idx = static_cast<uint32_t>(le(op == 'h' ? 1 : 4));
        const auto it = memo_.find(idx);
        if (it == memo_.end()) fail(cat("memo entry ", idx, " was never stored"));
        stack_.push_back(it->second);
        break;
      }
      case 'c': global(); break;
      case 't': stack_.push_back(make(Value{Kind::kTuple, {}, {}, 0, {}, pop_to_mark()})); break;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<uint32_t> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        stack_.push_back(make(Value{Kind::kTuple, {}, {}, 0, {}, std::move(items)}));
        break;
      }
      case 'Q': persistent_id(); break;
      case 'R': reduce(); break;
      case 'u': set_items(pop_to_mark()); break;
      case 's': {
        const uint32_t v = pop(), k = pop();
        set_items({k, v});
        break;
      }
      case 'a':
      case 'e': {
        const std::vector<uint32_t> items = op == 'e' ? pop_to_mark() : std::vector<uint32_t>{pop()};
        std::vector<uint32_t>& list = expect(top(), Kind::kList, "APPEND target").items;
        list.insert(list.end(), items.begin(), items.end());
        break;
      }
      case 'b': {  // BUILD: only an OrderedDict's attributes (state_dict._metadata)
        const uint32_t state = pop();
        expect(top(), Kind::kDict, "BUILD target");
        if (at(state).kind != Kind::kDict && at(state).kind != Kind::kNone)
          fail("BUILD state of a dict must be a dict");
        break;
      }
      default:
        fail(cat(opcode_name(op), " is not allowed in a torch.save state dict"));
    }
  }
}

}  // namespace

TorchStateDict unpickle_state_dict(std::string_view pickle, const std::string& where) {
  if (pickle.size() > kMaxPickleBytes)
    throw Error(cat(where, ": pickle of ", pickle.size(), " bytes exceeds the limit of ",
                    kMaxPickleBytes));
  Machine m(pickle, where);
  const Value& root = m.at(m.run());
  if (root.kind != Kind::kDict)
    throw Error(cat(where, ": holds a ", kind_name(root.kind), ", not a state dict"));
  TorchStateDict out;
  std::set<std::string> seen;
  for (size_t i = 0; i < root.items.size(); i += 2) {
    const Value& key = m.at(root.items[i]);
    const Value& value = m.at(root.items[i + 1]);
    if (key.kind != Kind::kString)
      throw Error(cat(where, ": state dict key is a ", kind_name(key.kind), ", not a string"));
    const std::string what = cat(where, ": '", printable(key.text), "'");
    if (!seen.insert(key.text).second) throw Error(cat(what, " appears twice"));
    if (value.kind != Kind::kTensor)
      throw Error(cat(what, " is a ", kind_name(value.kind), ", not a tensor"));
    const TensorValue& t = m.tensor(value);
    const TorchStorageRef& s = m.storage(t.storage);
    // Only dense row-major views can be borrowed as they are; dimensions of
    // size 1 carry no stride information (torch leaves them arbitrary).
    const int64_t numel = shape_numel(t.shape);
    int64_t row_major = 1;
    for (size_t d = t.shape.size(); d-- > 0 && numel > 0;) {
      if (t.shape[d] != 1 && t.stride[d] != row_major)
        throw Error(cat(what, ": shape ", shape_str(t.shape), " with stride ", shape_str(t.stride),
                        " is not contiguous row-major"));
      row_major *= t.shape[d];
    }
    if (numel > s.numel || t.offset > s.numel - numel)
      throw Error(cat(what, ": elements [", t.offset, ", ", t.offset, " + ", numel,
                      ") reach past the end of storage '", s.key, "' of ", s.numel, " elements"));
    out.emplace_back(key.text, TorchTensorRef{s, t.offset, t.shape});
  }
  return out;
}

}  // namespace ssm
