// The one list of built-in backends. A new backend is its folder of kernels
// plus a line here.
#include "ops/backend_registry.h"

#include "ssm/core/error.h"

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

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const Backend* b : all_backends()) out.emplace_back(b->name());
  return out;
}

}  // namespace ssm
