// What a directory holds, for tests of writers that must leave nothing
// behind (temp files) or exactly a set of files.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ssm::testing {

// The names of the entries of dir, sorted.
inline std::vector<std::string> file_names(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ssm::testing
