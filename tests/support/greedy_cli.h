// Greedy generation through the program with token ids in and out, for the
// HF family tests: HF goldens hold ids, and sessions are checked by ids.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/tensor/tensor.h"
#include "support/cli.h"
#include "support/temp_dir.h"

namespace ssm::testing {

inline std::vector<int64_t> ids_of(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
}

inline std::string joined(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += cat(s.empty() ? "" : ",", id);
  return s;
}

inline std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> out;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

// `ssm generate` greedily from prompt ids, n new tokens, printing the ids.
inline CliRun greedy(const std::string& model, const std::vector<int64_t>& prompt, int64_t n,
                     const std::string& session = "") {
  std::vector<std::string> a = {"generate",      model, "--prompt-ids",   joined(prompt),
                                "--temperature", "0",   "--print-ids",    "-q",
                                "--ignore-eos",  "-n",  std::to_string(n)};
  if (!session.empty()) a.insert(a.end(), {"--session", session});
  return run_ssm(a);
}

// A conversation continued from a session file (two prompts, six tokens
// each) ends with the tokens of one run over the first run's text and the
// second prompt.
inline void expect_session_equals_one_run(const std::string& model) {
  TempDir dir;
  const std::string session = (dir / "chat.state").string();
  const std::vector<int64_t> first = {5, 17, 200, 3, 99}, second = {42, 7, 130};
  const CliRun r1 = greedy(model, first, 6, session);
  ASSERT_EQ(r1.code, 0) << r1.err;
  const std::vector<int64_t> ids1 = parse_ids(r1.out);
  ASSERT_EQ(ids1.size(), first.size() + 6);
  const CliRun r2 = greedy(model, second, 6, session);
  ASSERT_EQ(r2.code, 0) << r2.err;
  const std::vector<int64_t> ids2 = parse_ids(r2.out);
  ASSERT_EQ(ids2.size(), second.size() + 6);
  std::vector<int64_t> whole = ids1;
  whole.insert(whole.end(), second.begin(), second.end());
  const CliRun all = greedy(model, whole, 6);
  ASSERT_EQ(all.code, 0) << all.err;
  const std::vector<int64_t> ids_all = parse_ids(all.out);
  ASSERT_EQ(ids_all.size(), whole.size() + 6);
  EXPECT_EQ(std::vector<int64_t>(ids_all.end() - 6, ids_all.end()),
            std::vector<int64_t>(ids2.end() - 6, ids2.end()));
}

}  // namespace ssm::testing
