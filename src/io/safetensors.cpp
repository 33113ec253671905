#include "ssm/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"

namespace ssm {
namespace {

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile st;
  st.file_ = MappedFile::open(path);
  const std::string where = path.string();
  const size_t size = st.file_->size();
  if (size < 8) throw Error(cat(where, ": truncated safetensors file (", size, " bytes)"));
  const uint64_t header_len = read_le64(st.file_->data());
  if (header_len > kMaxSafetensorsHeader)
    throw Error(cat(where, ": safetensors header length ", header_len, " exceeds the limit of ",
                    kMaxSafetensorsHeader, " bytes"));
  if (header_len > size - 8)
    throw Error(cat(where, ": truncated safetensors file: header needs ", header_len,
                    " bytes, file has ", size - 8));
  st.data_start_ = 8 + header_len;
  const size_t data_size = size - st.data_start_;

  Json header;
  try {
    header = Json::parse(st.file_->data() + 8, st.file_->data() + st.data_start_);
  } catch (const Json::exception& e) {
    throw Error(cat(where, ": safetensors header is not valid JSON: ", e.what()));
  }
  if (!header.is_object()) throw Error(cat(where, ": safetensors header is not a JSON object"));

  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw Error(cat(where, ": __metadata__ is not an object"));
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) throw Error(cat(where, ": __metadata__ value of '", k, "' is not a string"));
        st.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string what = cat(where, ": tensor '", name, "'");
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      throw Error(cat(what, " lacks dtype, shape or data_offsets"));
    const Json& jd = info["dtype"];
    const auto dtype = jd.is_string() ? dtype_from_name(jd.get<std::string>()) : std::nullopt;
    if (!dtype) throw Error(cat(what, " has unsupported dtype ", jd.dump()));
    Shape shape;
    if (!info["shape"].is_array()) throw Error(cat(what, ": shape is not an array"));
    for (const Json& d : info["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 48))
        throw Error(cat(what, ": bad dimension ", d.dump(), " in shape"));
      shape.push_back(d.get<int64_t>());
    }
    const Json& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw Error(cat(what, ": data_offsets must be two non-negative integers"));
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw Error(cat(what, ": data_offsets [", begin, ", ", end, "] outside the ", data_size,
                      "-byte data section"));
    int64_t numel;
    try {
      numel = shape_numel(shape);
    } catch (const Error& e) {
      throw Error(cat(what, ": ", e.what()));
    }
    const uint64_t elem = dtype_size(*dtype);
    if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / elem ||
        static_cast<uint64_t>(numel) * elem != end - begin)
      throw Error(cat(what, ": shape ", shape_str(shape), " of ", dtype_name(*dtype), " needs ",
                      static_cast<uint64_t>(numel) * elem, " bytes but data_offsets span ",
                      end - begin));
    st.tensors_[name] = Entry{*dtype, std::move(shape), static_cast<size_t>(begin)};
    spans.emplace_back(begin, end);
  }
  // As the reference reader: tensors tile the data section exactly.
  std::sort(spans.begin(), spans.end());
  size_t expect = 0;
  for (const auto& [b, e] : spans) {
    if (b < expect) throw Error(cat(where, ": tensors overlap at byte ", b, " of the data section"));
    if (b > expect) throw Error(cat(where, ": gap in the data section at byte ", expect));
    expect = e;
  }
  if (expect != data_size)
    throw Error(cat(where, ": data section has ", data_size - expect,
                    " trailing bytes no tensor covers"));
  return st;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(cat(path().string(), ": no tensor named '", name, "'"));
  const Entry& e = it->second;
  return Tensor::borrow(file_, file_->data() + data_start_ + e.begin, e.dtype, e.shape);
}

void SafetensorsFile::release(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return;
  const Entry& e = it->second;
  file_->release(file_->data() + data_start_ + e.begin, shape_numel(e.shape) * dtype_size(e.dtype));
}

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (!seen.insert(name).second) throw Error(cat(path.string(), ": duplicate tensor '", name, "'"));
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  write_file_atomically(path, [&](FileWriter& w) {
    char len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    w.write(len, 8);
    w.write(text);
    // Header order is sorted by name; bytes must follow the offsets above,
    // which follow the input order.
    for (const auto& [name, t] : tensors) w.write(t.raw(), t.nbytes());
  });
}

}  // namespace ssm
