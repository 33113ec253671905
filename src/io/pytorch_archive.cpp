#include "ssm/io/pytorch_archive.h"

#include <zip.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "ssm/core/log.h"
#include "ssm/io/mapped_file.h"
#include "ssm/io/pickle.h"

namespace ssm {
namespace {

// Deflate cannot expand data by more than about 1032:1, so a compressed
// entry's declared size is checked against its compressed size (which lies
// inside the file) before a buffer of that size is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;
// How much of a stored entry is read through libzip to confirm the offset at
// which it is borrowed from the mapping.
constexpr size_t kOffsetCheckBytes = 4096;

// libzip reads the archive from the mapping through this source. It also
// notes where each read starts: the first byte of an entry's data that libzip
// delivers comes from a read starting at the entry's data offset in the file.
struct MappedSource {
  const char* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  size_t last_read = 0;
  zip_error_t error{};
};

zip_int64_t mapped_source(void* state, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* s = static_cast<MappedSource*>(state);
  switch (cmd) {
    case ZIP_SOURCE_OPEN:
      s->pos = 0;
      return 0;
    case ZIP_SOURCE_READ: {
      const size_t n = std::min<size_t>(len, s->size - s->pos);
      s->last_read = s->pos;
      if (n) std::memcpy(data, s->data + s->pos, n);
      s->pos += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE:
    case ZIP_SOURCE_FREE:
      return 0;
    case ZIP_SOURCE_STAT: {
      auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &s->error);
      if (!st) return -1;
      zip_stat_init(st);
      st->size = s->size;
      st->valid |= ZIP_STAT_SIZE;
      return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR:
      return zip_error_to_data(&s->error, data, len);
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t p = zip_source_seek_compute_offset(s->pos, s->size, data, len, &s->error);
      if (p < 0) return -1;
      s->pos = static_cast<size_t>(p);
      return 0;
    }
    case ZIP_SOURCE_TELL:
      return static_cast<zip_int64_t>(s->pos);
    case ZIP_SOURCE_SUPPORTS:
      return ZIP_SOURCE_SUPPORTS_SEEKABLE;
    default:
      zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0);
      return -1;
  }
}

struct EntryInfo {
  zip_uint64_t index;
  uint64_t size, comp_size;
  uint16_t method;
  std::string name;
};

// The archive's directory and entry reading, through libzip.
class ZipReader {
 public:
  ZipReader(const MappedFile& file, const std::string& where) : where_(where) {
    src_.data = file.data();
    src_.size = file.size();
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_function_create(mapped_source, &src_, &error);
    if (source) zip_ = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
    if (!zip_) {
      if (source) zip_source_free(source);
      const std::string why = zip_error_strerror(&error);
      zip_error_fini(&error);
      throw Error(cat(where, ": not a readable zip archive (", why,
                      "); a truncated or damaged torch.save file?"));
    }
    zip_error_fini(&error);
  }
  ~ZipReader() { zip_discard(zip_); }
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    const zip_int64_t n = zip_get_num_entries(zip_, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      const char* name = zip_get_name(zip_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
      if (name) out.emplace_back(name);
    }
    return out;
  }

  std::optional<EntryInfo> find(const std::string& name) const {
    zip_stat_t st;
    if (zip_stat(zip_, name.c_str(), ZIP_FL_ENC_RAW, &st) != 0) return std::nullopt;
    constexpr zip_uint64_t kNeed = ZIP_STAT_INDEX | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE |
                                   ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if ((st.valid & kNeed) != kNeed) throw Error(cat(where_, ": entry ", name, " lacks sizes"));
    if (st.encryption_method != ZIP_EM_NONE)
      throw Error(cat(where_, ": entry ", name, " is encrypted"));
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      throw Error(cat(where_, ": entry ", name, " uses compression method ", st.comp_method,
                      " (only stored and deflated entries are read)"));
    const EntryInfo e{st.index, st.size, st.comp_size, st.comp_method, name};
    // Both bounds only read the central directory's figures, so they hold
    // before a byte of the entry is read or a buffer is sized from them.
    if (e.comp_size > src_.size ||
        (e.method == ZIP_CM_STORE ? e.size != e.comp_size
                                  : e.size > e.comp_size * kMaxDeflateRatio + 64))
      throw Error(cat(where_, ": entry ", name, " declares ", e.size, " bytes from ", e.comp_size,
                      " stored bytes in a ", src_.size, "-byte file"));
    return e;
  }

  // Reads exactly n bytes from the start of an entry (its whole length when
  // n == e.size); libzip checks the CRC once the end is reached.
  void read(const EntryInfo& e, char* dst, uint64_t n) {
    zip_file_t* f = zip_fopen_index(zip_, e.index, 0);
    if (!f) throw Error(cat(where_, ": cannot open entry ", e.name, ": ", zip_strerror(zip_)));
    uint64_t done = 0;
    while (done < n) {
      const zip_int64_t got = zip_fread(f, dst + done, n - done);
      if (got <= 0) {
        const std::string why = got < 0 ? zip_file_strerror(f) : "unexpected end of data";
        zip_fclose(f);
        throw Error(cat(where_, ": cannot read entry ", e.name, ": ", why));
      }
      done += static_cast<uint64_t>(got);
    }
    zip_fclose(f);
  }

  std::string read_string(const EntryInfo& e) {
    std::string s(e.size, '\0');
    read(e, s.data(), e.size);
    return s;
  }

  // Where a stored entry's bytes lie in the file, confirmed by comparing a
  // prefix read through libzip; nullopt when that cannot be established.
  std::optional<size_t> data_offset(const EntryInfo& e) {
    if (e.method != ZIP_CM_STORE || e.size == 0) return std::nullopt;
    char first;
    read(e, &first, 1);
    const size_t at = src_.last_read;
    if (at > src_.size || e.size > src_.size - at) return std::nullopt;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(e.size, kOffsetCheckBytes));
    std::string prefix(n, '\0');
    read(e, prefix.data(), n);
    if (std::memcmp(prefix.data(), src_.data + at, n) != 0) return std::nullopt;
    return at;
  }

 private:
  std::string where_;
  MappedSource src_;
  zip_t* zip_ = nullptr;
};

// The folder inside the archive that holds data.pkl (torch names it after
// the file; its readers take whatever single folder is there).
std::string record_prefix(const std::vector<std::string>& names, const std::string& where) {
  std::string prefix;
  for (const std::string& n : names) {
    const size_t slash = n.find('/');
    if (slash == std::string::npos || n.substr(slash) != "/data.pkl") continue;
    if (!prefix.empty())
      throw Error(
          cat(where, ": holds more than one data.pkl (", prefix, ", ", n.substr(0, slash), ")"));
    prefix = n.substr(0, slash);
  }
  if (prefix.empty())
    throw Error(cat(where, ": zip archive without <folder>/data.pkl: not a torch.save file"));
  return prefix;
}

}  // namespace

PyTorchArchive PyTorchArchive::open(const std::filesystem::path& path) {
  const std::string where = path.string();
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() == 0) throw Error(cat(where, ": empty file"));
  if (static_cast<unsigned char>(file->data()[0]) == 0x80)
    throw Error(cat(where,
                    ": legacy (non-zip) torch.save format, written by torch < 1.6; "
                    "re-save it with a current torch"));
  ZipReader zip(*file, where);
  const std::string prefix = record_prefix(zip.names(), where);

  if (const auto order = zip.find(prefix + "/byteorder")) {
    if (order->size > 16) throw Error(cat(where, ": byteorder entry too long"));
    const std::string text = zip.read_string(*order);
    if (text != "little")
      throw Error(
          cat(where, ": tensors are stored '", text, "'-endian; only little-endian is read"));
  }
  const auto pkl = zip.find(prefix + "/data.pkl");
  if (!pkl) throw Error(cat(where, ": cannot stat ", prefix, "/data.pkl"));
  if (pkl->size > kMaxPickleBytes)
    throw Error(
        cat(where, ": data.pkl of ", pkl->size, " bytes exceeds the limit of ", kMaxPickleBytes));
  const TorchStateDict state = unpickle_state_dict(zip.read_string(*pkl), cat(where, ": data.pkl"));

  PyTorchArchive archive;
  archive.path_ = path;
  archive.file_ = file;
  std::map<std::string, size_t> storage_index;
  for (const auto& [name, t] : state) {
    const TorchStorageRef& s = t.storage;
    const size_t elem = dtype_size(s.dtype);
    auto [it, fresh] = storage_index.emplace(s.key, archive.storages_.size());
    if (fresh) {
      const std::string entry_name = cat(prefix, "/data/", s.key);
      const auto entry = zip.find(entry_name);
      if (!entry)
        throw Error(cat(where, ": storage '", s.key, "' of tensor '", name,
                        "' is missing from the archive (no entry ", entry_name, ")"));
      // The pickle's numel was checked not to overflow bytes.
      const uint64_t nbytes = static_cast<uint64_t>(s.numel) * elem;
      if (entry->size != nbytes)
        throw Error(cat(where, ": storage '", s.key, "' of tensor '", name, "' declares ", s.numel,
                        " ", dtype_name(s.dtype), " elements (", nbytes, " bytes) but entry ",
                        entry_name, " holds ", entry->size, " bytes"));
      Storage storage;
      const std::optional<size_t> at = zip.data_offset(*entry);
      if (at && reinterpret_cast<uintptr_t>(file->data() + *at) % elem == 0) {
        storage.owner = file;
        storage.data = file->data() + *at;
        ++archive.borrowed_;
      } else if (nbytes > 0) {
        const size_t padded = (nbytes + 63) / 64 * 64;
        void* p = std::aligned_alloc(64, padded);
        if (!p)
          throw Error(cat(where, ": out of memory reading ", nbytes, " bytes of ", entry_name));
        storage.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
        storage.data = static_cast<char*>(p);
        zip.read(*entry, storage.data, nbytes);
      }
      archive.storages_.push_back(std::move(storage));
    }
    archive.tensors_[name] =
        Entry{it->second, static_cast<size_t>(t.offset) * elem, s.dtype, t.shape};
    archive.order_.push_back(name);
  }
  log_info(where, ": ", archive.borrowed_, " storages used in place, ", archive.copied_storages(),
           " read into memory");
  return archive;
}

Tensor PyTorchArchive::get(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(cat(path_.string(), ": no tensor named '", name, "'"));
  const Entry& e = it->second;
  const Storage& s = storages_[e.storage];
  return Tensor::borrow(s.owner, s.data ? s.data + e.byte_offset : nullptr, e.dtype, e.shape);
}

void PyTorchArchive::release(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return;
  const Entry& e = it->second;
  const Storage& s = storages_[e.storage];
  // A storage read into memory is outside the mapping: release ignores it.
  if (s.data && file_)
    file_->release(s.data + e.byte_offset, shape_numel(e.shape) * dtype_size(e.dtype));
}

namespace {

class PyTorchSource : public TensorSource {
 public:
  explicit PyTorchSource(PyTorchArchive archive) : archive_(std::move(archive)) {}
  std::vector<std::string> names() const override { return archive_.names(); }
  std::optional<Tensor> find(const std::string& name) const override {
    if (!archive_.contains(name)) return std::nullopt;
    return archive_.get(name);
  }
  void release(const std::string& name) const override { archive_.release(name); }
  std::string describe() const override { return archive_.path().string(); }

 private:
  PyTorchArchive archive_;
};

}  // namespace

std::unique_ptr<TensorSource> open_pytorch_source(const std::filesystem::path& file) {
  return std::make_unique<PyTorchSource>(PyTorchArchive::open(file));
}

}  // namespace ssm
