#include "ssm/core/error.h"

namespace ssm::detail {

void check_failed(const char* expr, const char* file, int line, const std::string& message) {
  throw Error(cat("internal check failed: ", expr, " at ", file, ":", line,
                  message.empty() ? "" : ": ", message));
}

}  // namespace ssm::detail
