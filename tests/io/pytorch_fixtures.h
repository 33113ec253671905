// Hand-built torch.save archives for tests: pickle bytes written opcode by
// opcode as torch.save lays them out, zipped with libzip.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/tensor/tensor.h"

namespace ssm::testing {

class PickleWriter {
 public:
  PickleWriter& raw(const std::string& bytes) { return out_ += bytes, *this; }
  PickleWriter& op(uint8_t code) { return out_ += static_cast<char>(code), *this; }
  PickleWriter& proto(uint8_t version = 2) { return op(0x80).op(version); }
  PickleWriter& str(const std::string& s) { return op('X').le(s.size(), 4).raw(s); }
  PickleWriter& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  PickleWriter& integer(int64_t v) {
    if (v >= 0 && v < 256) return op('K').le(static_cast<uint64_t>(v), 1);
    if (v >= 0 && v < 65536) return op('M').le(static_cast<uint64_t>(v), 2);
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').le(static_cast<uint64_t>(v), 4);
    return op(0x8a).op(8).le(static_cast<uint64_t>(v), 8);  // LONG1
  }
  PickleWriter& put(uint32_t i) { return i < 256 ? op('q').le(i, 1) : op('r').le(i, 4); }
  PickleWriter& get(uint32_t i) { return i < 256 ? op('h').le(i, 1) : op('j').le(i, 4); }
  PickleWriter& tuple(const Shape& s) { return tuple(std::vector<int64_t>(s.begin(), s.end())); }
  PickleWriter& tuple(const std::vector<int64_t>& items) {
    if (items.empty()) return op(')');
    if (items.size() > 3) op('(');
    for (int64_t v : items) integer(v);
    return items.size() > 3 ? op('t') : op(static_cast<uint8_t>(0x84 + items.size()));
  }
  PickleWriter& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

struct FakeTensor {
  std::string name;
  std::string key;  // storage entry data/<key>
  int64_t storage_numel;
  Shape shape;
  int64_t offset = 0;
  std::vector<int64_t> stride = {};  // empty: row-major
  std::string storage_type = "FloatStorage";
  bool as_parameter = false;  // wrapped in torch._utils._rebuild_parameter
  std::string tied_to = {};   // the same object as this earlier tensor (BINGET)
};

inline std::vector<int64_t> row_major(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// The data.pkl torch.save writes for these tensors: a plain dict, or an
// OrderedDict carrying _metadata through BUILD as nn.Module.state_dict() has.
inline std::string state_dict_pickle(const std::vector<FakeTensor>& tensors, bool ordered = false) {
  PickleWriter w;
  w.proto();
  if (ordered)
    w.global("collections", "OrderedDict").op(')').op('R');
  else
    w.op('}');
  w.put(0).op('(');
  uint32_t memo = 1;
  std::map<std::string, uint32_t> tensor_memo;
  for (const FakeTensor& t : tensors) {
    w.str(t.name).put(memo++);
    if (!t.tied_to.empty()) {
      w.get(tensor_memo.at(t.tied_to));
      continue;
    }
    if (t.as_parameter) w.global("torch._utils", "_rebuild_parameter").put(memo++).op('(');
    w.global("torch._utils", "_rebuild_tensor_v2").put(memo++).op('(');
    w.op('(').str("storage").global("torch", t.storage_type).str(t.key).str("cpu");
    w.integer(t.storage_numel).op('t').put(memo++).op('Q');
    w.integer(t.offset).tuple(t.shape).tuple(t.stride.empty() ? row_major(t.shape) : t.stride);
    w.op(0x89).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    if (t.as_parameter)
      w.put(memo++).op(0x88).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    tensor_memo[t.name] = memo;
    w.put(memo++);
  }
  w.op('u');
  if (ordered) {
    // state = {"_metadata": OrderedDict([("", {"version": 1}), ("tags", [None, True])])}
    w.op('}').str("_metadata").global("collections", "OrderedDict").op(')').op('R');
    w.op('(').str("").op('}').str("version").integer(1).op('s').op('u');
    w.str("tags").op(']').op('(').op('N').op(0x88).op('e').op('s').op('s').op('b');
  }
  return w.op('.').bytes();
}

inline std::string floats_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

struct ZipEntry {
  std::string name;
  std::string bytes;
  bool deflate = false;
};

inline void write_zip(const std::filesystem::path& path, const std::vector<ZipEntry>& entries) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!za) throw Error(cat("zip_open ", path.string(), " failed: ", err));
  for (const ZipEntry& e : entries) {
    zip_source_t* src = zip_source_buffer(za, e.bytes.data(), e.bytes.size(), 0);
    const zip_int64_t idx = src ? zip_file_add(za, e.name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) throw Error(cat("zip_file_add ", e.name, ": ", zip_strerror(za)));
    zip_set_file_compression(za, static_cast<zip_uint64_t>(idx),
                             e.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(za) != 0) throw Error(cat("zip_close ", path.string(), ": ", zip_strerror(za)));
}

// A torch.save-like archive: archive/data.pkl, archive/byteorder and one
// archive/data/<key> per storage.
inline void write_torch_archive(const std::filesystem::path& path, const std::string& pickle,
                                const std::vector<std::pair<std::string, std::string>>& storages,
                                bool deflate = false, const std::string& byteorder = "little") {
  std::vector<ZipEntry> entries{{"archive/data.pkl", pickle, deflate}};
  if (!byteorder.empty()) entries.push_back({"archive/byteorder", byteorder});
  for (const auto& [key, bytes] : storages)
    entries.push_back({"archive/data/" + key, bytes, deflate});
  entries.push_back({"archive/version", "3\n"});
  write_zip(path, entries);
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fresh directory removed with its contents when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ssm-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw Error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Runs the built ssm program with args (paths single-quoted by the caller);
// returns its exit code and puts stdout and stderr in output.
inline int run_cli(const std::string& args, std::string* output = nullptr) {
  const std::string cmd = std::string("'") + SSM_CLI_PATH + "' " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw Error(cat("cannot run ", cmd));
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  const int status = ::pclose(pipe);
  if (output) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string shell_quoted(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

}  // namespace ssm::testing
