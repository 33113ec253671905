#include "ssm/io/checkpoint.h"

#include <map>

#include "ssm/io/json.h"
#include "ssm/io/pytorch_archive.h"
#include "ssm/io/safetensors.h"

namespace ssm {
namespace {

class SafetensorsSource : public TensorSource {
 public:
  explicit SafetensorsSource(SafetensorsFile file) : file_(std::move(file)) {}
  std::vector<std::string> names() const override { return file_.names(); }
  std::optional<Tensor> find(const std::string& name) const override {
    if (!file_.contains(name)) return std::nullopt;
    return file_.get(name);
  }
  void release(const std::string& name) const override { file_.release(name); }
  std::string describe() const override { return file_.path().string(); }

 private:
  SafetensorsFile file_;
};

// Shards of either format: File is SafetensorsFile or PyTorchArchive.
template <typename File>
class ShardedSource : public TensorSource {
 public:
  ShardedSource(std::filesystem::path index, std::map<std::string, File> shards,
                std::map<std::string, std::string> where)
      : index_(std::move(index)), shards_(std::move(shards)), where_(std::move(where)) {}
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, _] : where_) out.push_back(name);
    return out;
  }
  std::optional<Tensor> find(const std::string& name) const override {
    const auto it = where_.find(name);
    if (it == where_.end()) return std::nullopt;
    return shards_.at(it->second).get(name);
  }
  void release(const std::string& name) const override {
    const auto it = where_.find(name);
    if (it != where_.end()) shards_.at(it->second).release(name);
  }
  std::string describe() const override { return index_.string(); }

 private:
  std::filesystem::path index_;
  std::map<std::string, File> shards_;
  std::map<std::string, std::string> where_;
};

// An index {"weight_map": {name: shard file}}, checked to name plain files.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index) {
  const Json j = load_json_file(index);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(cat(index.string(), ": missing object 'weight_map'"));
  std::map<std::string, std::string> where;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string())
      throw Error(cat(index.string(), ": weight_map entry '", name, "' is not a file name"));
    const std::string file = shard.get<std::string>();
    if (file.find('/') != std::string::npos || file == ".." || file.empty())
      throw Error(cat(index.string(), ": shard name '", file, "' must be a plain file name"));
    where[name] = file;
  }
  return where;
}

// Opens each shard once and checks that it holds the tensors the index puts
// there.
template <typename File>
std::unique_ptr<TensorSource> open_sharded(const std::filesystem::path& index) {
  std::map<std::string, std::string> where = read_weight_map(index);
  std::map<std::string, File> shards;
  for (const auto& [name, file] : where) {
    if (!shards.count(file)) shards.emplace(file, File::open(index.parent_path() / file));
    if (!shards.at(file).contains(name))
      throw Error(cat(index.string(), ": tensor '", name, "' is not in shard ", file));
  }
  return std::make_unique<ShardedSource<File>>(index, std::move(shards), std::move(where));
}

}  // namespace

std::unique_ptr<TensorSource> open_safetensors_source(const std::filesystem::path& file) {
  return std::make_unique<SafetensorsSource>(SafetensorsFile::open(file));
}

std::unique_ptr<TensorSource> open_sharded_safetensors(const std::filesystem::path& index) {
  return open_sharded<SafetensorsFile>(index);
}

std::unique_ptr<TensorSource> open_sharded_pytorch(const std::filesystem::path& index) {
  return open_sharded<PyTorchArchive>(index);
}

std::unique_ptr<TensorSource> open_checkpoint(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(model_dir)) throw Error(cat(model_dir.string(), ": not a model directory"));
  if (fs::exists(model_dir / "model.safetensors"))
    return open_safetensors_source(model_dir / "model.safetensors");
  if (fs::exists(model_dir / "model.safetensors.index.json"))
    return open_sharded_safetensors(model_dir / "model.safetensors.index.json");
  if (fs::exists(model_dir / "pytorch_model.bin"))
    return open_pytorch_source(model_dir / "pytorch_model.bin");
  if (fs::exists(model_dir / "pytorch_model.bin.index.json"))
    return open_sharded_pytorch(model_dir / "pytorch_model.bin.index.json");
  throw Error(cat(model_dir.string(),
                  ": no weights found (expected model.safetensors, "
                  "model.safetensors.index.json, pytorch_model.bin or "
                  "pytorch_model.bin.index.json)"));
}

}  // namespace ssm
