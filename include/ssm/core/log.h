// One levelled logger with a settable sink; library code never prints directly.
#pragma once

#include <functional>
#include <string>

#include "ssm/core/error.h"

namespace ssm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using LogSink = std::function<void(LogLevel, const std::string&)>;

// The default sink writes to stderr at kWarning and above.
void set_log_sink(LogSink sink);
void set_log_level(LogLevel level);
void log_message(LogLevel level, const std::string& message);

template <typename... Args>
void log_info(Args&&... args) {
  log_message(LogLevel::kInfo, cat(std::forward<Args>(args)...));
}
template <typename... Args>
void log_warning(Args&&... args) {
  log_message(LogLevel::kWarning, cat(std::forward<Args>(args)...));
}

}  // namespace ssm
