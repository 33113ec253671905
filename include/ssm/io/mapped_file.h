// A read-only view of a whole file through mmap. Pages are mapped private and
// writable (copy-on-write) so that tensors borrowed from the file can be
// updated in place by training without touching the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>

namespace ssm {

class MappedFile {
 public:
  // Throws ssm::Error naming the path when it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  char* data_ = nullptr;
  size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace ssm
