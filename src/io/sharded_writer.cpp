#include "ssm/io/sharded_writer.h"

#include <cstdio>
#include <memory>
#include <regex>
#include <set>

#include "ssm/io/json.h"
#include "ssm/io/staged_file.h"

namespace ssm {
namespace {

uint64_t spec_bytes(const TensorSpec& s) {
  return static_cast<uint64_t>(shape_numel(s.shape)) * dtype_size(s.dtype);
}

// The first tensor of each shard: a shard is closed when the next tensor
// would take it past shard_bytes, and never left empty.
std::vector<size_t> plan_shards(const std::vector<TensorSpec>& specs, uint64_t shard_bytes) {
  std::vector<size_t> first{0};
  uint64_t used = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = spec_bytes(specs[i]);
    if (used > 0 && bytes > shard_bytes - std::min(used, shard_bytes)) {
      first.push_back(i);
      used = 0;
    }
    used += bytes;
  }
  return first;
}

// The safetensors header of specs[begin, end): offsets in that order, the
// JSON padded with spaces so that the data starts 8-byte aligned.
std::string shard_header(const std::vector<TensorSpec>& specs, size_t begin, size_t end) {
  Json header = Json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (size_t i = begin; i < end; ++i) {
    const uint64_t bytes = spec_bytes(specs[i]);
    header[specs[i].name] = {{"dtype", dtype_name(specs[i].dtype)},
                             {"shape", specs[i].shape},
                             {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  return out + text;
}

// Weight files of an earlier model in dir, the index first: once it is gone
// no loader takes the directory for a sharded model.
std::vector<std::filesystem::path> earlier_weights(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
    if (std::filesystem::exists(dir / name, ec)) out.push_back(dir / name);
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    if (std::regex_match(it->path().filename().string(), shard)) out.push_back(it->path());
  return out;
}

}  // namespace

std::vector<std::string> shard_file_names(size_t n) {
  if (n == 1) return {"model.safetensors"};
  std::vector<std::string> out;
  for (size_t i = 1; i <= n; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i, n);
    out.emplace_back(name);
  }
  return out;
}

ShardedWriteResult write_sharded_safetensors(const std::filesystem::path& dir,
                                             const std::vector<TensorSpec>& specs,
                                             const std::function<Tensor(size_t)>& produce,
                                             const ShardedWriteOptions& options) {
  SSM_CHECK(options.shard_bytes > 0, "shard size must be positive");
  std::set<std::string> seen;
  for (const TensorSpec& s : specs)
    if (!seen.insert(s.name).second)
      throw Error(cat(dir.string(), ": duplicate tensor '", s.name, "'"));
  std::vector<size_t> first = plan_shards(specs, options.shard_bytes);
  first.push_back(specs.size());
  const size_t n_shards = first.size() - 1;
  ShardedWriteResult result;
  result.files = shard_file_names(n_shards);
  if (n_shards > 99999)
    throw Error(cat(dir.string(), ": ", n_shards, " shards; at most 99999 (raise the shard size)"));

  std::vector<std::unique_ptr<StagedFile>> staged;
  Json weight_map = Json::object();
  for (size_t s = 0; s < n_shards; ++s) {
    auto& file = staged.emplace_back(std::make_unique<StagedFile>(dir / result.files[s]));
    file->writer().write(shard_header(specs, first[s], first[s + 1]));
    for (size_t i = first[s]; i < first[s + 1]; ++i) {
      if (options.check_stop) options.check_stop();
      const Tensor t = produce(i);
      SSM_CHECK(t.dtype() == specs[i].dtype && t.shape() == specs[i].shape, "tensor '",
                specs[i].name, "' produced as ", dtype_name(t.dtype()), " ", shape_str(t.shape()),
                ", planned as ", dtype_name(specs[i].dtype), " ", shape_str(specs[i].shape));
      file->writer().write(t.raw(), t.nbytes());
      result.data_bytes += t.nbytes();
      weight_map[specs[i].name] = result.files[s];
    }
    file->finish();
  }
  std::vector<std::unique_ptr<StagedFile>> companions;
  for (const auto& [name, text] : options.companions) {
    auto& file = companions.emplace_back(std::make_unique<StagedFile>(dir / name));
    file->writer().write(text);
    file->finish();
  }
  std::unique_ptr<StagedFile> index;
  if (n_shards > 1) {
    const Json j = {{"metadata", {{"total_size", result.data_bytes}}}, {"weight_map", weight_map}};
    index = std::make_unique<StagedFile>(dir / "model.safetensors.index.json");
    index->writer().write(j.dump(2) + "\n");
    index->finish();
  }
  if (options.check_stop) options.check_stop();

  // Everything is on disk: swap the models. The file that makes the
  // directory a model (the index, or the single model.safetensors) comes last.
  const std::set<std::string> ours(result.files.begin(), result.files.end());
  for (const std::filesystem::path& old : earlier_weights(dir)) {
    if (ours.count(old.filename().string())) continue;  // replaced by the rename
    std::error_code ec;
    std::filesystem::remove(old, ec);
    if (ec)
      throw Error(cat(old.string(), ": cannot remove the earlier model's weights: ", ec.message()));
  }
  for (size_t s = 0; s < n_shards; ++s)
    if (n_shards > 1) staged[s]->commit();
  for (auto& file : companions) file->commit();
  if (index)
    index->commit();
  else
    staged.front()->commit();
  return result;
}

}  // namespace ssm
