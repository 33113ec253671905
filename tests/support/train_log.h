// The "step N/M loss X" lines `ssm train` prints, by step: as printed, for
// runs that must agree to the last digit (a resumed run and an uninterrupted
// one), or as numbers, for runs that agree within a tolerance (ranks).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

namespace ssm::testing {

inline std::map<int, std::string> printed_step_losses(const std::string& log) {
  std::map<int, std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    int step = 0, total = 0;
    char loss[64];
    if (std::sscanf(line.c_str(), "step %d/%d loss %63s", &step, &total, loss) == 3)
      out[step] = loss;
  }
  return out;
}

inline std::map<int, double> step_losses(const std::string& log) {
  std::map<int, double> out;
  for (const auto& [step, text] : printed_step_losses(log)) out[step] = std::strtod(text.c_str(), nullptr);
  return out;
}

}  // namespace ssm::testing
