#include "cli/id_list.h"

#include <charconv>

#include "cli/usage_error.h"

namespace ssm::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<int64_t> parse_id_list(std::string_view list, const std::string& flag,
                                   const std::function<std::string(int64_t)>& problem) {
  std::vector<int64_t> ids;
  if (trim(list).empty()) return ids;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw UsageError(cat(flag, ": '", item, "' is not a token id (expected e.g. 3,17,42)"));
    if (const std::string why = problem(id); !why.empty()) throw UsageError(cat(flag, ": token id ", id, " ", why));
    ids.push_back(id);
    if (comma == std::string_view::npos) return ids;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace ssm::cli
