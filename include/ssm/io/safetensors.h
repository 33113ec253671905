// safetensors: an 8-byte little-endian header length, a JSON header mapping
// names to {dtype, shape, data_offsets}, then the packed tensor bytes.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ssm/io/mapped_file.h"
#include "ssm/tensor/tensor.h"

namespace ssm {

// Upper bound on the JSON header; real headers are kilobytes to a few MB.
inline constexpr size_t kMaxSafetensorsHeader = 100u << 20;

class SafetensorsFile {
 public:
  // Maps the file and validates the header completely: well-formed JSON,
  // known dtypes, shapes whose byte size matches the offsets, offsets inside
  // the file, tensors packed without overlap or gaps. ssm::Error otherwise.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_->path(); }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // A tensor sharing the mapped bytes (copy-on-write); ssm::Error when absent.
  Tensor get(const std::string& name) const;
  // MappedFile::release of the tensor's bytes; nothing when absent.
  void release(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    size_t begin;
  };
  std::shared_ptr<MappedFile> file_;
  size_t data_start_ = 0;
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes atomically; tensors keep their dtype. Names must be unique.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace ssm
