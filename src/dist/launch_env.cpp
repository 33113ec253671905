#include "ssm/dist/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "ssm/core/error.h"

namespace ssm::dist {
namespace {

// A whole decimal number in [min, max], else ssm::Error naming the variable.
int parse_int(const std::string& name, const std::string& text, long min, long max) {
  char* end = nullptr;
  errno = 0;
  const long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max)
    throw Error(cat("launch environment: ", name, "='", text, "' is not a whole number in [", min,
                    ", ", max, "]"));
  return static_cast<int>(v);
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

std::optional<LaunchEnv> read_launch_env(const EnvLookup& env) {
  const char* const required[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> missing, present;
  for (const char* name : required) (env(name) ? present : missing).push_back(name);
  if (present.empty()) return std::nullopt;
  if (!missing.empty()) {
    std::ostringstream m;
    m << "launch environment: " << present[0] << " is set but ";
    for (size_t i = 0; i < missing.size(); ++i) m << (i ? ", " : "") << missing[i];
    m << (missing.size() == 1 ? " is" : " are")
      << " not (a data-parallel process needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, "
         "as torchrun sets them)";
    throw Error(m.str());
  }
  LaunchEnv e;
  e.world_size = parse_int("WORLD_SIZE", *env("WORLD_SIZE"), 1, 1 << 20);
  e.rank = parse_int("RANK", *env("RANK"), 0, e.world_size - 1);
  e.local_rank =
      env("LOCAL_RANK") ? parse_int("LOCAL_RANK", *env("LOCAL_RANK"), 0, 1 << 20) : e.rank;
  e.master_addr = *env("MASTER_ADDR");
  if (e.master_addr.empty()) throw Error("launch environment: MASTER_ADDR is empty");
  e.master_port = parse_int("MASTER_PORT", *env("MASTER_PORT"), 1, 65535);
  return e;
}

std::string visible_device_for(int local_rank, const std::optional<std::string>& visible) {
  if (!visible || visible->empty()) return std::to_string(local_rank);
  std::vector<std::string> ids;
  std::stringstream in(*visible);
  for (std::string id; std::getline(in, id, ',');) ids.push_back(id);
  if (local_rank >= static_cast<int>(ids.size()))
    throw Error(cat("LOCAL_RANK ", local_rank, " has no GPU: CUDA_VISIBLE_DEVICES='", *visible,
                    "' lists ", ids.size()));
  return ids[local_rank];
}

}  // namespace ssm::dist
