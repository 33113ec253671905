// Where a model's weights come from: one interface over single and sharded
// safetensors (and, through the same interface, PyTorch archives).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::vector<std::string> names() const = 0;
  // The tensor as stored (any dtype), or nullopt when absent.
  virtual std::optional<Tensor> find(const std::string& name) const = 0;
  // The caller is done with the tensor's bytes (it made its own copy): their
  // pages mapped from the file leave this process's memory (a later find
  // reads them again). Only before anything has written to them.
  virtual void release(const std::string& name) const { (void)name; }
  // Human-readable origin for error messages (a path).
  virtual std::string describe() const = 0;
};

std::unique_ptr<TensorSource> open_safetensors_source(const std::filesystem::path& file);
// model.safetensors.index.json: {"weight_map": {name: shard file}}.
std::unique_ptr<TensorSource> open_sharded_safetensors(const std::filesystem::path& index);

// Picks the weights in a model directory. Safetensors wins over PyTorch
// archives when both are present. ssm::Error when none is found.
std::unique_ptr<TensorSource> open_checkpoint(const std::filesystem::path& model_dir);

}  // namespace ssm
