// What every command-line mistake must look like to a user: exit status 2,
// one line on stderr with the project's prefix naming the culprit, nothing
// on stdout.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/cli.h"

namespace ssm::testing {

inline void expect_usage_error(const std::vector<std::string>& args, const std::string& names) {
  // Bounded: a command that starts instead (a server) fails the test, not hangs it.
  const CliRun r = run_ssm_expecting_exit(args);
  std::string shown;
  for (const std::string& a : args) shown += a + " ";
  EXPECT_EQ(r.code, 2) << shown << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("ssm: error: ", 0), 0u) << shown << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << "\n" << r.err;
  EXPECT_TRUE(contains(r.err, names)) << shown << "\nexpected '" << names << "' in: " << r.err;
  EXPECT_EQ(r.out, "") << shown;
}

}  // namespace ssm::testing
