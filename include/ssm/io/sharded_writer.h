// Writes a model's weights as the HF hub lays them out: model.safetensors,
// or, past one shard's worth of bytes, model-00001-of-0000N.safetensors ...
// plus model.safetensors.index.json. Streaming: each tensor is asked for
// when its bytes are due and dropped once written, so writing a model needs
// the memory of one tensor, not of the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm {

struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

struct ShardedWriteOptions {
  // Data bytes per shard at most, unless one tensor alone is larger (it then
  // fills a shard by itself). Tensors keep their order across shards.
  uint64_t shard_bytes = uint64_t{5} << 30;
  // Small files (config.json) that must appear with the weights: written
  // beside them, named relative to the directory.
  std::vector<std::pair<std::string, std::string>> companions;
  // Called before each tensor is produced; throws to abandon the write
  // (Ctrl-C), which then leaves nothing behind.
  std::function<void()> check_stop;
};

struct ShardedWriteResult {
  std::vector<std::string> files;  // the shards, in order
  uint64_t data_bytes = 0;
};

// The shard file names for n shards (model.safetensors when n is 1).
std::vector<std::string> shard_file_names(size_t n);

// Writes specs into dir (which must exist); produce(i) returns tensor i,
// of specs[i]'s dtype and shape, after produce(i - 1). Atomic as a whole:
// every file is written to a temp file and flushed first; then the weights
// of an earlier model in dir (its index, model.safetensors and shards) are
// removed, the new shards, the companions and, last, the index (or the one
// model.safetensors) renamed into place. An error or a throwing check_stop
// before that leaves dir as it was, apart from temp files it removes.
ShardedWriteResult write_sharded_safetensors(const std::filesystem::path& dir,
                                             const std::vector<TensorSpec>& specs,
                                             const std::function<Tensor(size_t)>& produce,
                                             const ShardedWriteOptions& options = {});

}  // namespace ssm
