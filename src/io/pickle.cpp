#include "ssm/io/pickle.h"

#include <set>

#include "io/pickle_machine.h"

namespace ssm {

using pickle_vm::Kind;
using pickle_vm::Machine;
using pickle_vm::TensorValue;
using pickle_vm::kind_name;
using pickle_vm::printable;
using pickle_vm::Value;

TorchStateDict unpickle_state_dict(std::string_view pickle, const std::string& where) {
  if (pickle.size() > kMaxPickleBytes)
    throw Error(
        cat(where, ": pickle of ", pickle.size(), " bytes exceeds the limit of ", kMaxPickleBytes));
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
