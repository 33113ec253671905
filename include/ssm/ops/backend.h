// A backend: a device, the kernels that compute there (an OpTable) and the
// resources a context of it holds. Backends are listed in one registry
// (src/ops/backend_registry.cpp); each lives in its own folder of kernels
// (src/ops/ref, src/ops/cpu, ...). See docs/ARCHITECTURE.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ssm/ops/context.h"
#include "ssm/tensor/device.h"

namespace ssm {

struct OpTable;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
  virtual const OpTable& ops() const = 0;
  // Called once per Context; null when the backend keeps nothing per context.
  virtual std::unique_ptr<BackendResources> make_resources() const { return nullptr; }
};

// ssm::Error naming the backends that exist when `name` is not one of them.
const Backend& find_backend(std::string_view name);
// The built-in backends, "ref" first.
std::vector<std::string> backend_names();

}  // namespace ssm
