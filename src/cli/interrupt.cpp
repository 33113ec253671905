#include "cli/interrupt.h"

#include <csignal>

namespace ssm::cli {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // safe in a signal handler

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

InterruptCatcher::InterruptCatcher() {
  g_interrupted.store(false);
  std::signal(SIGINT, on_sigint);
}

InterruptCatcher::~InterruptCatcher() { std::signal(SIGINT, SIG_DFL); }

const std::atomic<bool>& InterruptCatcher::flag() const { return g_interrupted; }

void InterruptCatcher::request() const { g_interrupted.store(true); }

}  // namespace ssm::cli
