// A backend: a device, the kernels that compute there (an OpTable) and the
// resources a context of it holds. Backends are listed in one registry
// (src/ops/backend_registry.cpp); each lives in its own folder of kernels
// (src/ops/ref, src/ops/cpu, ...). See docs/ARCHITECTURE.md.
#pragma once

#include <cstdint>
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
  // Rows (batch x time) a sequence layer's inference call works on at once:
  // longer inputs go through in time segments, the state carried between
  // them, so that the workspace stays in the host's caches however long the
  // prompt. A device backend asks for many more (one launch over all of
  // them keeps the chip busy; small segments would multiply the launches);
  // 0: whole sequences, however long.
  virtual int64_t sequence_segment_rows() const { return 256; }
};

// ssm::Error naming the backends that exist when `name` is not one of them.
const Backend& find_backend(std::string_view name);
// The built-in backends, "ref" first.
std::vector<std::string> backend_names();

}  // namespace ssm
