// Token ids as users type them on the command line: "3,17,42" (spaces
// around the commas allowed).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::cli {

// problem(id) says what is wrong with an id ("" when it is fine). A blank
// list is no ids. UsageError naming flag for an item that is not a whole
// number, or that problem refuses.
std::vector<int64_t> parse_id_list(std::string_view list, const std::string& flag,
                                   const std::function<std::string(int64_t)>& problem);

}  // namespace ssm::cli
