// What several server tests share: the models they serve, the reference
// greedy generation by `ssm generate`, and reading an SSE stream.
#pragma once

#include <string>
#include <vector>

#include "serve/serve_process.h"
#include "ssm/core/error.h"
#include "support/compare.h"

namespace ssm::testing {

inline std::string default_model() { return std::string(SSM_BUILD_DIR) + "/share/ssm/models/default"; }

inline std::string join_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (const int64_t id : ids) s += cat(s.empty() ? "" : ",", id);
  return s;
}

// The new ids of `ssm generate MODEL --prompt-ids PROMPT --temperature 0 -n N`.
inline std::vector<int64_t> generate_greedy(const std::string& model, const std::vector<int64_t>& prompt, int64_t n) {
  const CliRun r = run_ssm({"generate", model, "--prompt-ids", join_ids(prompt), "--print-ids", "--temperature", "0",
                            "--max-tokens", std::to_string(n), "--threads", "1", "-q"});
  if (r.code != 0) throw std::runtime_error("ssm generate failed: " + r.err);
  std::vector<int64_t> ids;
  size_t at = 0;
  const std::string line = r.out.substr(0, r.out.find('\n'));
  while (at < line.size()) {
    const size_t comma = line.find(',', at);
    ids.push_back(std::stoll(line.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return std::vector<int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(prompt.size()), ids.end());
}

inline std::vector<int64_t> completion_ids(const Reply& r) {
  return r.body.at("ssm").at("completion_ids").get<std::vector<int64_t>>();
}

// The JSON documents of an SSE body, "[DONE]" as a string.
inline std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    at = end;
  }
  return events;
}

}  // namespace ssm::testing
