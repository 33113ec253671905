#include "ssm/core/log.h"

#include <cstdio>
#include <mutex>

namespace ssm {
namespace {

// The logger is the one process-wide piece of configuration: a sink is a
// property of the embedding program, not of any model or context.
struct Logger {
  std::mutex mutex;
  LogLevel level = LogLevel::kWarning;
  LogSink sink = [](LogLevel lvl, const std::string& msg) {
    static const char* const kNames[] = {"debug", "info", "warning", "error"};
    std::fprintf(stderr, "ssm %s: %s\n", kNames[static_cast<int>(lvl)], msg.c_str());
  };
};

Logger& logger() {
  static Logger instance;
  return instance;
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard lock(logger().mutex);
  logger().sink = std::move(sink);
}

void set_log_level(LogLevel level) {
  std::lock_guard lock(logger().mutex);
  logger().level = level;
}

void log_message(LogLevel level, const std::string& message) {
  std::lock_guard lock(logger().mutex);
  if (level >= logger().level && logger().sink) logger().sink(level, message);
}

}  // namespace ssm
