// The WebAssembly build has no libzip: PyTorch's zip checkpoints
// (pytorch_model.bin) are refused with a message saying how to convert
// them; safetensors checkpoints load as everywhere. (Sharded PyTorch
// checkpoints, checkpoint.cpp, open their shards through these.)
#include "ssm/core/error.h"
#include "ssm/io/pytorch_archive.h"

namespace ssm {
namespace {

[[noreturn]] void refuse(const std::filesystem::path& path) {
  throw Error(cat(
      path.string(),
      ": PyTorch checkpoints are not read by the WebAssembly build; convert it to safetensors with "
      "`ssm convert` first"));
}

}  // namespace

PyTorchArchive PyTorchArchive::open(const std::filesystem::path& path) { refuse(path); }
Tensor PyTorchArchive::get(const std::string&) const { refuse(path_); }
void PyTorchArchive::release(const std::string&) const { refuse(path_); }
std::unique_ptr<TensorSource> open_pytorch_source(const std::filesystem::path& file) {
  refuse(file);
}

}  // namespace ssm
