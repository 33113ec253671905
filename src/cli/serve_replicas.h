// Where `ssm serve` keeps its copies of the model: --gpus 0,1 (one replica
// per GPU), --devices cpu,cpu,cuda:1 (any mix; host entries may repeat),
// or, with neither, one replica of --backend. The flags are read here, with
// an error naming the flag for an empty list, a repeated GPU, an entry that
// is not a device, or a GPU in a build without CUDA.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ssm::cli {

struct ReplicaSpec {
  std::string backend;  // "cpu", "ref", "cuda"
  int index = 0;        // the GPU's ordinal; 0 on the host
  std::string flag;     // the flag that asked for it, for errors
  std::string label;    // as the server shows it: "cpu", "cuda:1"
  bool on_host() const { return backend != "cuda"; }
};

// gpus and devices as given (nullopt: not given); backend is --backend, and
// backend_given whether the user wrote it (allowed with the lists only as
// `--backend cuda --gpus LIST`). UsageError naming the flag.
std::vector<ReplicaSpec> serve_replicas(const std::optional<std::string>& gpus,
                                        const std::optional<std::string>& devices,
                                        const std::string& backend, bool backend_given);

}  // namespace ssm::cli
