#include "ssm/io/atomic_file.h"
#include "ssm/io/staged_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "ssm/core/error.h"
#include "ssm/core/log.h"

namespace ssm {
namespace {

std::string errno_text() { return std::strerror(errno); }

class FdWriter : public FileWriter {
 public:
  FdWriter(int fd, const std::filesystem::path& path) : fd_(fd), path_(path) {}
  using FileWriter::write;
  void write(const void* data, size_t size) override {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(cat(path_.string(), ": write failed: ", errno_text()));
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::filesystem::path path_;
};

std::filesystem::path parent_dir(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : ".";
}

// Temp files of path are named <prefix><pid>.XXXXXX.
std::string temp_prefix(const std::filesystem::path& path) {
  return "." + path.filename().string() + ".tmp.";
}

// The writer's pid from what follows the prefix, or nullopt for a name that
// does not carry one.
std::optional<pid_t> writer_pid(const std::string& rest) {
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 10) return std::nullopt;
  long long pid = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
    pid = pid * 10 + (rest[i] - '0');
  }
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::vector<std::filesystem::path> stale_temp_files(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> out;
  const std::string prefix = temp_prefix(path);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(parent_dir(path), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // A live writer (another process, or another thread of this one) is
    // still working on its file.
    const std::optional<pid_t> pid = writer_pid(name.substr(prefix.size()));
    if (pid && (*pid == ::getpid() || process_exists(*pid))) continue;
    out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t remove_stale_temp_files(const std::filesystem::path& path) {
  size_t removed = 0;
  for (const std::filesystem::path& stale : stale_temp_files(path)) {
    std::error_code size_ec, ec;
    const uintmax_t bytes = std::filesystem::file_size(stale, size_ec);
    if (!std::filesystem::remove(stale, ec) || ec) continue;  // raced with another cleaner
    ++removed;
    log_warning(path.string(), ": removed ", stale.filename().string(), " (",
                size_ec ? 0 : bytes, " bytes), left by a write interrupted before it completed");
  }
  return removed;
}

namespace {

// Where a write of path lands: a symbolic link is followed, so that the link
// stays and its target gets the contents (as the shell's `>` does) rather
// than the link being replaced by a file. What exists there must be a
// regular file: renaming a temp file over a device or a pipe (/dev/null,
// /dev/stdout, a FIFO) would replace it, not write into it.
std::filesystem::path write_target(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  std::error_code ec;
  for (int hops = 0; std::filesystem::is_symlink(p, ec); ++hops) {
    if (hops == 40) throw Error(cat(path.string(), ": too many levels of symbolic links"));
    const std::filesystem::path link = std::filesystem::read_symlink(p, ec);
    if (ec) throw Error(cat(path.string(), ": cannot read the symbolic link: ", ec.message()));
    p = link.is_absolute() ? link : parent_dir(p) / link;
  }
  const std::filesystem::file_status st = std::filesystem::status(p, ec);
  if (std::filesystem::is_directory(st)) throw Error(cat(path.string(), ": is a directory, not a file"));
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw Error(cat(path.string(), ": is not a regular file (a device, pipe or socket); files are written "
                    "whole and renamed into place, so give the path of a file"));
  return p;
}

}  // namespace

void check_writable_file_path(const std::filesystem::path& given) {
  std::error_code ec;
  const std::filesystem::path path = write_target(given);
  const std::filesystem::path dir = parent_dir(path);
  if (!std::filesystem::exists(dir, ec))
    throw Error(cat(path.string(), ": directory ", dir.string(), " does not exist"));
  if (!std::filesystem::is_directory(dir, ec)) throw Error(cat(path.string(), ": ", dir.string(), " is not a directory"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(cat(path.string(), ": cannot write in ", dir.string(), ": ", errno_text()));
}

StagedFile::StagedFile(std::filesystem::path path) : path_(write_target(path)) {
  const std::filesystem::path dir = parent_dir(path_);
  remove_stale_temp_files(path_);
  std::string tmpl = (dir / cat(temp_prefix(path_), ::getpid(), ".XXXXXX")).string();
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0)
    throw Error(cat(path_.string(), ": cannot create temp file in ", dir.string(), ": ", errno_text()));
  tmp_ = tmpl;
  writer_ = std::make_unique<FdWriter>(fd_, path_);
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

FileWriter& StagedFile::writer() {
  SSM_CHECK(fd_ >= 0, path_.string(), ": written after it was finished");
  return *writer_;
}

void StagedFile::finish() {
  SSM_CHECK(fd_ >= 0, path_.string(), ": finished twice");
  if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0)
    throw Error(cat(path_.string(), ": cannot flush to disk: ", errno_text()));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(cat(path_.string(), ": close failed: ", errno_text()));
}

void StagedFile::commit() {
  SSM_CHECK(fd_ < 0 && !committed_, path_.string(), ": committed before it was finished");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw Error(cat(path_.string(), ": cannot rename temp file into place: ", errno_text()));
  committed_ = true;
  // The rename itself must reach the disk before we report success.
  const int dfd = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(FileWriter&)>& produce) {
  StagedFile file(path);
  produce(file.writer());
  file.finish();
  file.commit();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(path.string(), ": cannot open: ", errno_text()));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(cat(path.string(), ": read failed"));
  return ss.str();
}

}  // namespace ssm
