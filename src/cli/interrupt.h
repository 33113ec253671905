// Ctrl-C as a request to stop cleanly: while an InterruptCatcher lives, the
// first SIGINT sets its flag (the work stops at the next safe point and saves
// what it has) and restores the default action, so a second Ctrl-C kills.
#pragma once

#include <atomic>

namespace ssm::cli {

class InterruptCatcher {
 public:
  InterruptCatcher();
  ~InterruptCatcher();
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;

  bool requested() const { return flag().load(); }
  // Stops the work as Ctrl-C would, for a reason of the program's own (its
  // output cannot be written).
  void request() const;
  const std::atomic<bool>& flag() const;
};

}  // namespace ssm::cli
