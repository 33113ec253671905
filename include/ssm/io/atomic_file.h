// Crash-safe file writing: the destination holds either its old bytes or the
// complete new ones, never a mix (temp file in the same directory, fsync,
// rename, fsync of the directory).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

namespace ssm {

// Receives chunks of bytes to append; throws ssm::Error when the disk refuses.
class FileWriter {
 public:
  virtual ~FileWriter() = default;
  virtual void write(const void* data, size_t size) = 0;
  void write(const std::string& s) { write(s.data(), s.size()); }
};

// Runs produce(writer) into a temp file beside path and renames it over path.
// On any error the temp file is removed, path is untouched and ssm::Error
// names the path and the cause.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(FileWriter&)>& produce);

// Reads a whole file; ssm::Error names the path on failure.
std::string read_file(const std::filesystem::path& path);

}  // namespace ssm
