#include "cli/serve_replicas.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "cli/usage_error.h"
#include "ssm/ops/backend.h"

namespace ssm::cli {
namespace {

std::string trim(std::string s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && blank(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && blank(s[i])) ++i;
  return s.substr(i);
}

// The comma-separated entries of a list; UsageError for an empty list or entry.
std::vector<std::string> entries(const std::string& list, const std::string& flag,
                                 const char* example) {
  if (trim(list).empty())
    throw UsageError(cat(flag, ": the list is empty (e.g. ", flag, " ", example, ")"));
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = list.find(',', at);
    std::string item =
        trim(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (item.empty())
      throw UsageError(cat(flag, " ", list, ": an entry is empty (e.g. ", flag, " ", example, ")"));
    out.push_back(std::move(item));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// A GPU ordinal: a whole number from 0.
int gpu_index(const std::string& text, const std::string& flag, const std::string& list) {
  int v = -1;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || text[0] == '-' || ec != std::errc() || p != end || v < 0 || v > 1023)
    throw UsageError(
        cat(flag, " ", list, ": '", text, "' is not a GPU index (a whole number from 0 to 1023)"));
  return v;
}

bool built_in(const std::string& backend) {
  const auto names = backend_names();
  return std::find(names.begin(), names.end(), backend) != names.end();
}

}  // namespace

std::vector<ReplicaSpec> serve_replicas(const std::optional<std::string>& gpus,
                                        const std::optional<std::string>& devices,
                                        const std::string& backend, bool backend_given) {
  std::vector<ReplicaSpec> out;
  if (!gpus && !devices) {
    out.push_back({backend, 0, "--backend", backend == "cuda" ? "cuda:0" : backend});
    return out;
  }
  // `--backend cuda --gpus 0,1` says the same twice (as `ssm train` takes
  // it); any other --backend contradicts the lists.
  if (backend_given && !(backend == "cuda" && gpus && !devices))
    throw UsageError(cat("--backend ", backend, ": with ", gpus ? "--gpus" : "--devices",
                         " each replica names its device; leave --backend out"));
  std::set<int> gpus_seen;
  const auto add_gpu = [&](int index, const std::string& flag, const std::string& list) {
    if (!gpus_seen.insert(index).second)
      throw UsageError(
          cat(flag, " ", list, ": GPU ", index, " is listed twice (one replica per GPU)"));
    out.push_back({"cuda", index, flag, cat("cuda:", index)});
  };
  if (gpus)
    for (const std::string& e : entries(*gpus, "--gpus", "0,1"))
      add_gpu(gpu_index(e, "--gpus", *gpus), "--gpus", *gpus);
  if (devices) {
    for (const std::string& e : entries(*devices, "--devices", "cpu,cpu or cuda:0,cpu")) {
      if (e == "cuda") {
        add_gpu(0, "--devices", *devices);
      } else if (e.rfind("cuda:", 0) == 0) {
        add_gpu(gpu_index(e.substr(5), "--devices", *devices), "--devices", *devices);
      } else if (built_in(e)) {
        out.push_back({e, 0, "--devices", e});
      } else {
        throw UsageError(
            cat("--devices ", *devices, ": '", e, "' is not a device (cpu, ref, cuda:N)"));
      }
    }
  }
  // After the lists' own errors, which hold in any build.
  for (const ReplicaSpec& r : out)
    if (!r.on_host() && !built_in("cuda"))
      throw UsageError(cat(r.flag, " ", r.flag == "--gpus" ? *gpus : *devices,
                           ": this build has no CUDA backend (configure with -DSSM_CUDA=ON)"));
  return out;
}

}  // namespace ssm::cli
