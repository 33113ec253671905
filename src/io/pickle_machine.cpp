#include "io/pickle_machine.h"

#include <array>
#include <cstdio>
#include <limits>
#include <optional>

namespace ssm::pickle_vm {
namespace {

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
    "DoubleStorage", "ByteStorage",         "CharStorage",          "ShortStorage",
    "BoolStorage",   "ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage"};

// Every pickle opcode by name, so that a refused one is named in the error.
std::string opcode_name(uint8_t op) {
  struct OpName {
    uint8_t op;
    const char* name;
  };
  // clang-format off
  static constexpr OpName kNames[] = {
      {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
      {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
      {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"},
      {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
      {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
      {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"},
      {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
      {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
      {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {'B', "BINBYTES"},
      {'C', "SHORT_BINBYTES"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
      {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
      {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
      {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
      {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
  // clang-format on
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  for (const OpName& n : kNames)
    if (n.op == op) return cat("opcode ", n.name, " (", hex, ")");
  return cat("unknown opcode ", hex);
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kString:
      return "str";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kGlobal:
      return "global";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "?";
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 80 ? out + "..." : out;
}

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
      fail(cat("storage class torch.", name,
               " has no engine dtype (supported: FloatStorage, "
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
  if (numel < 0 ||
      static_cast<uint64_t>(numel) >
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
  if (size.size() != stride.size() || size.size() > static_cast<size_t>(Shape::kMaxDims))
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
    if (k == Kind::kList || k == Kind::kDict)
      fail(cat("a ", kind_name(k), " cannot be a dict key"));
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
        if (proto > 2)
          fail(cat("pickle protocol ", proto, " is not supported (torch.save writes 2)"));
        break;
      }
      case '.': {  // STOP
        if (stack_.size() != 1 || !marks_.empty())
          fail("STOP with a stack of other than one value");
        return stack_.back();
      }
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '}':
        stack_.push_back(make(Value{Kind::kDict}));
        break;
      case ']':
        stack_.push_back(make(Value{Kind::kList}));
        break;
      case ')':
        stack_.push_back(kEmptyTupleId);
        break;
      case 'N':
        stack_.push_back(kNoneId);
        break;
      case 0x88:
        stack_.push_back(kTrueId);
        break;
      case 0x89:
        stack_.push_back(kFalseId);
        break;
      case 'K':
        stack_.push_back(make(Value{Kind::kInt, {}, {}, static_cast<int64_t>(le(1))}));
        break;
      case 'M':
        stack_.push_back(make(Value{Kind::kInt, {}, {}, static_cast<int64_t>(le(2))}));
        break;
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
      case 'q':
        memo_[static_cast<uint32_t>(le(1))] = top();
        break;
      case 'r':
        memo_[static_cast<uint32_t>(le(4))] = top();
        break;
      case 'h':
      case 'j': {
        const auto idx = static_cast<uint32_t>(le(op == 'h' ? 1 : 4));
        const auto it = memo_.find(idx);
        if (it == memo_.end()) fail(cat("memo entry ", idx, " was never stored"));
        stack_.push_back(it->second);
        break;
      }
      case 'c':
        global();
        break;
      case 't':
        stack_.push_back(make(Value{Kind::kTuple, {}, {}, 0, {}, pop_to_mark()}));
        break;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<uint32_t> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        stack_.push_back(make(Value{Kind::kTuple, {}, {}, 0, {}, std::move(items)}));
        break;
      }
      case 'Q':
        persistent_id();
        break;
      case 'R':
        reduce();
        break;
      case 'u':
        set_items(pop_to_mark());
        break;
      case 's': {
        const uint32_t v = pop(), k = pop();
        set_items({k, v});
        break;
      }
      case 'a':
      case 'e': {
        const std::vector<uint32_t> items =
            op == 'e' ? pop_to_mark() : std::vector<uint32_t>{pop()};
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

}  // namespace ssm::pickle_vm
