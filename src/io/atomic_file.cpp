#include "ssm/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ssm/core/error.h"

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

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(FileWriter&)>& produce) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error(cat(path.string(), ": cannot create temp file in ", dir.string(), ": ",
                              errno_text()));
  const std::string tmp = tmpl;
  try {
    FdWriter writer(fd, path);
    produce(writer);
    if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0)
      throw Error(cat(path.string(), ": cannot flush to disk: ", errno_text()));
    if (::close(fd) != 0) {
      ::unlink(tmp.c_str());
      throw Error(cat(path.string(), ": close failed: ", errno_text()));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error(cat(path.string(), ": cannot rename temp file into place: ", why));
  }
  // The rename itself must reach the disk before we report success.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
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
