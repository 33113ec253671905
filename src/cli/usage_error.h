// Exit codes, and the error a command throws when its command line asks for
// something that cannot be done (caught in main, reported like CLI11's own
// parse errors).
#pragma once

#include "ssm/core/error.h"

namespace ssm::cli {

inline constexpr int kExitFailure = 1;       // the run failed: a file, the disk, the model
inline constexpr int kExitUsage = 2;         // the command line is wrong
inline constexpr int kExitInterrupted = 130;  // Ctrl-C, as shells report SIGINT

// The message names the flag or argument and says what is wrong with it.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace ssm::cli
