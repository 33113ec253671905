// Crash-safe file writing: the destination holds either its old bytes or the
// complete new ones, never a mix (temp file in the same directory, fsync,
// rename, fsync of the directory).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

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

// ssm::Error naming path and the cause unless write_file_atomically(path)
// can work: path is not a directory and lies in an existing directory this
// process may write in. Lets a program refuse before hours of work rather
// than when saving the result.
void check_writable_file_path(const std::filesystem::path& path);

// Temp files that interrupted writes of path left beside it
// (.NAME.tmp.<pid>.XXXXXX, and the pid-less .NAME.tmp.XXXXXX of older
// builds) whose writing process no longer exists. The pid keeps a write in
// progress in another process from being taken for a leftover.
std::vector<std::filesystem::path> stale_temp_files(const std::filesystem::path& path);

// Removes stale_temp_files(path), logging a warning for each; returns how
// many were removed. write_file_atomically calls it before writing.
size_t remove_stale_temp_files(const std::filesystem::path& path);

// Reads a whole file; ssm::Error names the path on failure.
std::string read_file(const std::filesystem::path& path);

}  // namespace ssm
