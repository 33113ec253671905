// JSON on standard output for --json: one document on one line, keys in the
// order they were added, and text that is not valid UTF-8 printed with
// U+FFFD in place of the bad bytes rather than failing.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>

namespace ssm::cli {

using OrderedJson = nlohmann::ordered_json;

inline void print_json(const OrderedJson& value) {
  const std::string text = value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace ssm::cli
