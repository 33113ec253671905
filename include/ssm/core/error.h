// Errors: ssm::Error for anything a user can cause (files, configs, flags),
// SSM_CHECK for invariants that must always hold.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ssm {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable; the one way messages are built.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

namespace detail {
[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& message);
}  // namespace detail

}  // namespace ssm

#define SSM_CHECK(cond, ...)                                                      \
  do {                                                                            \
    if (!(cond)) [[unlikely]]                                                     \
      ::ssm::detail::check_failed(#cond, __FILE__, __LINE__, ::ssm::cat(__VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define SSM_DCHECK(cond, ...) \
  do {                        \
  } while (0)
#else
#define SSM_DCHECK(cond, ...) SSM_CHECK(cond, __VA_ARGS__)
#endif
