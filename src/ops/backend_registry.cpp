// The one list of built-in backends. A new backend is its folder of kernels
// plus a line here.
#include "ops/backend_registry.h"

#include "ssm/core/error.h"
#include "ssm/ops/device_backend.h"

namespace ssm {
namespace {

const std::vector<const Backend*>& all_backends() {
  static const std::vector<const Backend*> list = [] {
    std::vector<const Backend*> l = {&ref_backend(), &cpu_backend()};
    if (const Backend* cuda = cuda_backend_if_built()) l.push_back(cuda);
    return l;
  }();
  return list;
}

}  // namespace

const Backend& find_backend(std::string_view name) {
  for (const Backend* b : all_backends())
    if (b->name() == name) return *b;
  std::string names;
  for (const std::string& s : backend_names()) names += (names.empty() ? "" : ", ") + s;
  throw Error(cat("unknown backend '", name, "' (built in: ", names, ")"));
}

const Backend& find_backend_on(std::string_view name, int device_index) {
  const Backend& b = find_backend(name);
  if (device_index == b.device().index) return b;
  if (device_index < 0) throw Error(cat("device index ", device_index, " is negative"));
  if (b.device().is_host())
    throw Error(cat("backend '", name, "' computes on the host: it has no device ", device_index));
  const Backend* on = cuda_backend_on_device(device_index);
  SSM_CHECK(on, "no device backend '", name, "'");
  return *on;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const Backend* b : all_backends()) out.emplace_back(b->name());
  return out;
}

}  // namespace ssm
