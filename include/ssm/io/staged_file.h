// Files written in steps and put in place together: the shards of a model and
// their index. The same temp file, fsync and rename as write_file_atomically
// (atomic_file.h), with the rename left to the caller.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "ssm/io/atomic_file.h"

namespace ssm {

// write_file_atomically in steps, for files that must appear together (the
// shards of a model and their index): each is written and flushed to its
// temp file, and only once all are complete are they renamed into place, one
// after another. A StagedFile destroyed before commit() removes its temp
// file, so an error or an interruption leaves none of them.
class StagedFile {
 public:
  // Creates the temp file beside path (removing stale ones of earlier runs).
  explicit StagedFile(std::filesystem::path path);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  FileWriter& writer();
  // Flushes the bytes to disk and closes the temp file.
  void finish();
  // Renames the finished temp file over path and flushes the directory.
  void commit();

 private:
  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::unique_ptr<FileWriter> writer_;
};

}  // namespace ssm
