// A restricted unpickler for the data.pkl that torch.save writes for a state
// dict. It is a small interpreter over a value stack that builds plain C++
// values: it knows only the protocol-2 opcodes torch.save emits and only the
// globals a state dict needs (collections.OrderedDict, _rebuild_tensor_v2,
// _rebuild_parameter and the typed storage classes). "Calling" one of those
// builds a tensor description; anything else (os.system, builtins.eval, an
// unknown opcode) is refused with ssm::Error as soon as it is read, so a
// hostile file never runs code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm {

// Upper bounds that keep a crafted pickle from exhausting memory. A state dict
// needs about 100 bytes and 15 values per tensor, so these allow models with
// hundreds of thousands of tensors.
inline constexpr size_t kMaxPickleBytes = 64u << 20;
inline constexpr size_t kMaxPickleValues = size_t{1} << 22;

// One storage of a torch.save archive: the bytes of the entry data/<key>.
struct TorchStorageRef {
  std::string key;
  DType dtype = DType::kF32;
  int64_t numel = 0;     // elements of dtype, as the pickle declares
  std::string location;  // "cpu", "cuda:0": where it lived when saved
};

// What _rebuild_tensor_v2 describes: a strided view of a storage. The
// unpickler has checked it is contiguous row-major and inside its storage.
struct TorchTensorRef {
  TorchStorageRef storage;
  int64_t offset = 0;  // in elements of the storage's dtype
  Shape shape;
};

using TorchStateDict = std::vector<std::pair<std::string, TorchTensorRef>>;

// Decodes data.pkl of torch.save(state_dict): tensor names in file order with
// their descriptions. `where` names the file in error messages. Throws
// ssm::Error for a disallowed global or opcode, a malformed or truncated
// pickle, a value that is not a tensor, a non-contiguous stride, or a view
// reaching past its storage's declared size.
TorchStateDict unpickle_state_dict(std::string_view pickle, const std::string& where);

}  // namespace ssm
