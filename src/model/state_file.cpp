#include "ssm/model/state_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>

#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/layers/attention_layer.h"

namespace ssm {
namespace {

constexpr char kMagic[8] = {'S', 'S', 'M', 'S', 'T', 'A', 'T', 'E'};
constexpr size_t kPreamble = 24;  // magic, version, header length, file length
constexpr size_t kTrailer = 4;    // crc32

// The dtypes a state tensor converts between on load (the SSM state's).
bool is_state_float(std::string_view dtype) {
  return dtype == dtype_name(DType::kF32) || dtype == dtype_name(DType::kBF16);
}

uint32_t crc_update(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename T>
T get_le(const std::string& in, size_t at) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

// The layer-state tensors of a session in file order, with their names.
std::vector<std::pair<std::string, Tensor*>> state_tensors(ModelState& state) {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < state.layers.size(); ++i)
    if (state.layers[i])
      for (auto& [name, t] : state.layers[i]->tensors()) out.emplace_back(cat("layers.", i, ".", name), t);
  return out;
}

// The fewest bytes one fresh sequence's state (empty KV caches) can take in
// a file: F32 and BF16 tensors counted at 2 bytes an element (either loads
// as the other).
double fresh_state_bytes(const LanguageModel& model) {
  ModelState one = model.make_state(1);
  double bytes = 0;
  for (const auto& [name, t] : state_tensors(one)) {
    const bool converts = t->dtype() == DType::kF32 || t->dtype() == DType::kBF16;
    bytes += static_cast<double>(t->numel()) * (converts ? 2.0 : static_cast<double>(dtype_size(t->dtype())));
  }
  return bytes;
}

Tensor on_host(const Tensor& t) { return t.device().is_host() ? t : t.to(Device::host()); }

// A KV cache cut to its longest sequence: the file holds no spare capacity.
void trim_cache(AttentionState& a) {
  int64_t len = 0;
  for (int64_t b = 0; b < a.batch(); ++b) len = std::max(len, a.length(b));
  if (len == a.capacity()) return;
  a.k = a.k.slice(2, 0, len).clone();
  a.v = a.v.slice(2, 0, len).clone();
}

// Every number a header holds is an integer; a float (which nlohmann would
// cast to int64 unchecked, undefined out of range) means a forged file.
// Iterative: a header may nest deeply.
bool only_integers(const Json& root) {
  std::vector<const Json*> todo = {&root};
  while (!todo.empty()) {
    const Json* j = todo.back();
    todo.pop_back();
    if (j->is_number_float()) return false;
    if (j->is_structured())
      for (const Json& v : *j) todo.push_back(&v);
  }
  return true;
}

}  // namespace

std::string model_fingerprint(LanguageModel& model, Context& ctx) {
  uint32_t layout = crc_update(0, nullptr, 0);
  const std::string config = model.config().source.dump();
  layout = crc_update(layout, config.data(), config.size());
  // Weights in pieces of at most 16 MiB so that large tensors spread over
  // the pool; the pieces and their order depend only on the model.
  struct Piece {
    const char* data;
    size_t size;
    uint32_t crc;
  };
  constexpr size_t kPiece = size_t{16} << 20;
  std::vector<Piece> pieces;
  // Weights on a device are read through host copies: a model has the same
  // fingerprint on every device, so a state saved on one loads on another.
  std::deque<Tensor> host_copies;
  model.for_each_param([&](const std::string& name, Param& p) {
    const std::string entry = cat(name, shape_str(p.shape), ";");
    layout = crc_update(layout, entry.data(), entry.size());
    SSM_CHECK(p.value.defined(), "parameter ", name, " is not loaded");
    // The weights as computed with: a model loaded with --dtype bf16 (or
    // stored so) is another model than its F32 original, its states differ.
    // F32 models keep the fingerprint they had before other dtypes counted.
    if (p.value.dtype() != DType::kF32) {
      const std::string dtype = cat(dtype_name(p.value.dtype()), ";");
      layout = crc_update(layout, dtype.data(), dtype.size());
    }
    const Tensor& v = p.value.device().is_host() ? p.value : host_copies.emplace_back(p.value.to(Device::host()));
    auto add = [&](const Tensor& t) {
      const char* bytes = static_cast<const char*>(t.raw());
      for (size_t at = 0; at < t.nbytes(); at += kPiece)
        pieces.push_back({bytes + at, std::min(kPiece, t.nbytes() - at), 0});
    };
    add(v);
    if (v.dtype() == DType::kQ8) add(v.scales());
  });
  ctx.pool().parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      pieces[i].crc = crc_update(crc_update(0, nullptr, 0), pieces[i].data, pieces[i].size);
  });
  uint32_t weights = crc_update(0, nullptr, 0);
  for (const Piece& p : pieces) {
    unsigned char le[4];
    for (int i = 0; i < 4; ++i) le[i] = static_cast<unsigned char>(p.crc >> (8 * i));
    weights = crc_update(weights, le, 4);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%08x%08x", layout, weights);
  return hex;
}

void save_state(const std::filesystem::path& path, SessionState& session,
                const std::string& fingerprint) {
  const int64_t B = session.batch();
  SSM_CHECK(static_cast<int64_t>(session.pending.size()) == B &&
                static_cast<int64_t>(session.recent.size()) == B &&
                static_cast<int64_t>(session.consumed.size()) == B,
            "session fields disagree with its batch of ", B);
  Json header;
  header["fingerprint"] = fingerprint;
  header["batch"] = B;
  header["position"] = session.model.position;
  Json seqs = Json::array();
  for (int64_t b = 0; b < B; ++b)
    seqs.push_back({{"pending", session.pending[b]},
                    {"consumed", session.consumed[b]},
                    {"recent", session.recent[b]}});
  header["sequences"] = seqs;
  // KV caches are written without spare capacity, from trimmed copies so
  // that the session itself is left as it is.
  std::vector<std::unique_ptr<AttentionState>> trimmed;
  std::deque<Tensor> host_copies;  // the tensors of a state on a device, read back
  std::vector<std::pair<std::string, Tensor*>> tensors;
  for (size_t i = 0; i < session.model.layers.size(); ++i) {
    LayerState* l = session.model.layers[i].get();
    if (auto* a = dynamic_cast<AttentionState*>(l)) {
      trimmed.push_back(std::make_unique<AttentionState>());
      trimmed.back()->k = on_host(a->k);
      trimmed.back()->v = on_host(a->v);
      trimmed.back()->lengths = a->lengths;
      trim_cache(*trimmed.back());
      l = trimmed.back().get();
    }
    if (l)
      for (auto& [name, t] : l->tensors()) {
        if (!t->device().is_host()) t = &host_copies.emplace_back(t->to(Device::host()));
        tensors.emplace_back(cat("layers.", i, ".", name), t);
      }
  }
  Json list = Json::array();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    list.push_back({{"name", name}, {"dtype", dtype_name(t->dtype())}, {"shape", t->shape()},
                    {"offset", offset}});
    offset += t->nbytes();
  }
  header["tensors"] = list;
  const std::string json = header.dump();

  std::string preamble(kMagic, sizeof kMagic);
  put_le<uint32_t>(preamble, kStateFileVersion);
  put_le<uint32_t>(preamble, static_cast<uint32_t>(json.size()));
  put_le<uint64_t>(preamble, kPreamble + json.size() + offset + kTrailer);
  write_file_atomically(path, [&](FileWriter& w) {
    uint32_t crc = crc_update(0, nullptr, 0);
    auto emit = [&](const void* data, size_t n) {
      crc = crc_update(crc, data, n);
      w.write(data, n);
    };
    emit(preamble.data(), preamble.size());
    emit(json.data(), json.size());
    for (const auto& [name, t] : tensors) emit(t->raw(), t->nbytes());
    std::string trailer;
    put_le<uint32_t>(trailer, crc);
    w.write(trailer);
  });
}

SessionState load_state(const std::filesystem::path& path, const LanguageModel& model,
                        const std::string& fingerprint) {
  const std::string file = path.string();
  auto fail = [&](const auto&... what) -> Error { return Error(cat(file, ": ", what...)); };
  const std::string bytes = read_file(path);
  const size_t size = bytes.size();
  if (size < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw fail(size < sizeof kMagic ? "truncated or not a session state file (" : "not a session state file (",
               size, " bytes, no SSMSTATE magic)");
  if (size < kPreamble + kTrailer)
    throw fail("truncated: ", size, " bytes, shorter than the fixed preamble");
  const uint32_t version = get_le<uint32_t>(bytes, 8);
  if (version > kStateFileVersion)
    throw fail("state file format version ", version, " is newer than this build reads (",
               kStateFileVersion, "); update ssm");
  if (version == 0) throw fail("corrupted: format version 0");
  const uint64_t expected = get_le<uint64_t>(bytes, 16);
  if (expected != size)
    throw fail(size < expected ? "truncated: " : "corrupted: ", size, " bytes, the header says ",
               expected);
  const uint32_t stored_crc = get_le<uint32_t>(bytes, size - kTrailer);
  if (crc_update(crc_update(0, nullptr, 0), bytes.data(), size - kTrailer) != stored_crc)
    throw fail("corrupted: checksum mismatch");
  const size_t header_len = get_le<uint32_t>(bytes, 12);
  if (header_len > size - kPreamble - kTrailer) throw fail("corrupted: header runs past the end");

  Json header;
  try {
    header = Json::parse(bytes.substr(kPreamble, header_len));
    if (!only_integers(header)) throw fail("corrupted: the header holds a non-integer number");
    const std::string fp = header.at("fingerprint").get<std::string>();
    if (fp != fingerprint)
      throw fail("saved by a different model (fingerprint ", fp, "; this model's is ",
                 fingerprint, ")");
    // Every size is checked against the bytes actually present before
    // anything is allocated for it.
    const size_t data_start = kPreamble + header_len, data_size = size - kTrailer - data_start;
    const int64_t B = header.at("batch").get<int64_t>();
    const Json& seqs = header.at("sequences");
    if (B <= 0 || !seqs.is_array() || static_cast<int64_t>(seqs.size()) != B)
      throw fail("corrupted: batch ", B, " with ", seqs.size(), " sequences");
    if (static_cast<double>(B) * fresh_state_bytes(model) > static_cast<double>(data_size))
      throw fail("corrupted: ", data_size, " bytes of state cannot hold ", B, " sequences");
    SessionState s = make_session(model, B);
    s.model.position = header.at("position").get<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      s.pending[b] = seqs[b].at("pending").get<int64_t>();
      s.consumed[b] = seqs[b].at("consumed").get<int64_t>();
      s.recent[b] = seqs[b].at("recent").get<std::vector<int64_t>>();
      if (s.pending[b] < -1 || s.pending[b] >= model.config().vocab_size)
        throw fail("corrupted: pending token ", s.pending[b], " of sequence ", b);
    }
    const Json& list = header.at("tensors");
    if (!list.is_array()) throw fail("malformed header: 'tensors' is not a list");
    // KV caches take the length they were saved with.
    for (const Json& e : list) {
      const std::string name = e.at("name").get<std::string>();
      size_t layer = 0;
      if (std::sscanf(name.c_str(), "layers.%zu.", &layer) != 1 || layer >= s.model.layers.size())
        throw fail("corrupted: state tensor name '", name, "'");
      auto* cache = dynamic_cast<AttentionState*>(s.model.layers[layer].get());
      const Shape shape = e.at("shape").get<Shape>();
      if (!cache || shape.size() != 4 || shape[2] <= cache->capacity()) continue;
      const double bytes = 4.0 * static_cast<double>(cache->k.dim(0)) * static_cast<double>(cache->k.dim(1)) *
                           static_cast<double>(cache->k.dim(3)) * static_cast<double>(shape[2]);
      if (bytes > static_cast<double>(data_size))
        throw fail("corrupted: KV cache '", name, "' of ", shape[2], " tokens exceeds the file");
      // A fresh cache is empty: only its capacity changes.
      cache->k = Tensor::zeros(DType::kF32, {cache->k.dim(0), cache->k.dim(1), shape[2], cache->k.dim(3)},
                               cache->k.device());
      cache->v = Tensor::zeros(DType::kF32, cache->k.shape(), cache->k.device());
    }
    const auto tensors = state_tensors(s.model);
    if (list.size() != tensors.size())
      throw fail("holds ", list.size(), " state tensors, the model has ", tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = tensors[i];
      const Json& e = list[i];
      const auto shape = e.at("shape").get<Shape>();
      // A Mamba state saved in F32 or BF16 loads into a model whose state
      // dtype is the other: widened exactly, or rounded as a step stores it.
      const std::string saved = e.at("dtype").get<std::string>();
      const bool converts = is_state_float(saved) && is_state_float(dtype_name(t->dtype()));
      if (e.at("name").get<std::string>() != name || (saved != dtype_name(t->dtype()) && !converts) ||
          shape != t->shape())
        throw fail("state tensor ", i, " is '", e.at("name").get<std::string>(), "' ",
                   e.at("dtype").get<std::string>(), " ", shape_str(shape), ", the model expects '",
                   name, "' ", dtype_name(t->dtype()), " ", shape_str(t->shape()));
      const size_t offset = e.at("offset").get<size_t>();
      const DType saved_dtype = saved == dtype_name(t->dtype())        ? t->dtype()
                                : saved == dtype_name(DType::kBF16) ? DType::kBF16
                                                                    : DType::kF32;
      const size_t saved_bytes = static_cast<size_t>(t->numel()) * dtype_size(saved_dtype);
      if (offset > data_size || saved_bytes > data_size - offset)
        throw fail("corrupted: tensor '", name, "' lies outside the file");
      if (saved != dtype_name(t->dtype())) {
        Tensor h = Tensor::empty(saved_dtype, t->shape());
        std::memcpy(h.raw(), bytes.data() + data_start + offset, saved_bytes);
        const Tensor converted = h.to_dtype(t->dtype());
        *t = t->device().is_host() ? converted : converted.to(t->device());
      } else if (t->device().is_host()) {
        std::memcpy(t->raw(), bytes.data() + data_start + offset, t->nbytes());
      } else {  // a state on a device: filled on the host, then uploaded
        Tensor h = Tensor::empty(t->dtype(), t->shape());
        std::memcpy(h.raw(), bytes.data() + data_start + offset, t->nbytes());
        *t = h.to(t->device());
      }
    }
    return s;
  } catch (const Json::exception& e) {
    throw fail("malformed header: ", e.what());
  }
}

void save_state(const std::filesystem::path& path, LanguageModel& model, SessionState& session,
                Context& ctx) {
  save_state(path, session, model_fingerprint(model, ctx));
}

SessionState load_state(const std::filesystem::path& path, LanguageModel& model, Context& ctx) {
  return load_state(path, model, model_fingerprint(model, ctx));
}

}  // namespace ssm
