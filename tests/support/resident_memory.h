// This process's resident memory from /proc/self/status, and its peak
// (VmHWM) reset, for tests that bound what a load or a write keeps in memory.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace ssm::testing {

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"), or -1.
inline int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stoll(line.substr(field.size() + 1)) * 1024;  // kB
  return -1;
}

// Sets VmHWM back to the current resident size; false where not allowed.
inline bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  return static_cast<bool>(f.flush());
}

// AddressSanitizer keeps freed blocks resident (its quarantine) and adds
// shadow memory, so a peak measured under it says nothing about a program's.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
#else
inline constexpr bool kUnderAsan = false;
#endif

}  // namespace ssm::testing
