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
  // Drops the whole pages inside [p, p + n) from this process's memory
  // (madvise MADV_DONTNEED): the bytes stay readable, a later read maps them
  // again from the file. For bytes a load has finished with (converted to
  // another dtype): without it the read pages stay resident as long as any
  // tensor keeps the mapping alive. Only for pages nothing has written to
  // (a written page is a private copy, and its changes would be lost).
  // Ranges outside the mapping are ignored.
  void release(const void* p, size_t n) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  char* data_ = nullptr;
  size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace ssm
