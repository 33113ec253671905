// The one list of built-in backends. A new backend is its folder of kernels
// plus a line here.
#include "ops/backend_registry.h"

#include "ssm/core/error.h"

namespace ssm {
namespace {

const Backend* const* all_backends(size_t* n) {
  static const Backend* const list[] = {
      &ref_backend(),
      &cpu_backend(),
  };
  *n = sizeof(list) / sizeof(list[0]);
  return list;
}

}  // namespace

const Backend& find_backend(std::string_view name) {
  size_t n = 0;
  const Backend* const* list = all_backends(&n);
  for (size_t i = 0; i < n; ++i)
    if (list[i]->name() == name) return *list[i];
  std::string names;
  for (const std::string& s : backend_names()) names += (names.empty() ? "" : ", ") + s;
  throw Error(cat("unknown backend '", name, "' (built in: ", names, ")"));
}

std::vector<std::string> backend_names() {
  size_t n = 0;
  const Backend* const* list = all_backends(&n);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(list[i]->name());
  return out;
}

}  // namespace ssm
