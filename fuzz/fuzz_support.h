// Shared by the libFuzzer targets: inputs handed to path-taking parsers
// without touching the disk, a silent logger, and reads of every byte of a
// tensor so that AddressSanitizer sees a view reaching past its buffer.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ssm/core/log.h"
#include "ssm/tensor/tensor.h"

namespace ssm::fuzz {

// One in-memory file per process, rewritten for each input. Its
// /proc/self/fd path opens (and maps) like a regular file.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::filesystem::path& write(const void* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::filesystem::path path_;
};

// Warnings about odd inputs are expected by the thousand; printing them
// would only slow the fuzzer down.
inline void silence_logging() {
  static const bool once = [] {
    set_log_sink([](LogLevel, const std::string&) {});
    return true;
  }();
  (void)once;
}

// Reads every byte of t (and widens floats, as loading does).
inline void touch(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  volatile unsigned sink = sum;
  (void)sink;
  if (t.dtype() == DType::kF16 || t.dtype() == DType::kBF16) (void)t.to_f32();
}

}  // namespace ssm::fuzz
