// PyTorch checkpoints as torch.save writes them (pytorch_model.bin): a zip
// archive holding <prefix>/data.pkl (a pickled state dict, decoded by the
// restricted unpickler of pickle.h) and one entry <prefix>/data/<key> per
// storage. torch.save stores entries uncompressed and 64-byte aligned, so
// tensors are borrowed straight from the mapped file; compressed or misaligned
// entries are read into owned buffers instead.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ssm/io/checkpoint.h"
#include "ssm/io/mapped_file.h"
#include "ssm/tensor/tensor.h"

namespace ssm {

class PyTorchArchive {
 public:
  // Maps the file, decodes data.pkl and checks every tensor against its
  // storage entry (present, the declared size, little-endian). ssm::Error
  // naming the file and tensor otherwise; nothing in the file is executed.
  static PyTorchArchive open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  // Tensor names in the order the state dict holds them.
  const std::vector<std::string>& names() const { return order_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // A tensor over its storage's bytes; tensors sharing a storage (a tied
  // lm_head.weight) share bytes. ssm::Error when absent.
  Tensor get(const std::string& name) const;
  // MappedFile::release of the tensor's bytes when they are used in place
  // from the mapping; nothing otherwise.
  void release(const std::string& name) const;

  // Storages used in place from the mapping vs read into owned buffers.
  size_t borrowed_storages() const { return borrowed_; }
  size_t copied_storages() const { return storages_.size() - borrowed_; }

 private:
  struct Storage {
    std::shared_ptr<void> owner;
    char* data = nullptr;
  };
  struct Entry {
    size_t storage;
    size_t byte_offset;
    DType dtype;
    Shape shape;
  };
  std::filesystem::path path_;
  std::vector<Storage> storages_;
  std::shared_ptr<MappedFile> file_;
  size_t borrowed_ = 0;
  std::map<std::string, Entry> tensors_;
  std::vector<std::string> order_;
};

// One pytorch_model.bin as a TensorSource.
std::unique_ptr<TensorSource> open_pytorch_source(const std::filesystem::path& file);
// pytorch_model.bin.index.json: {"weight_map": {name: shard file}}.
std::unique_ptr<TensorSource> open_sharded_pytorch(const std::filesystem::path& index);

}  // namespace ssm
