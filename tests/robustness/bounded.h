// Runs a parser on hostile input in a child whose address space is capped
// a little above what it already uses, so that an allocation sized from the
// input (instead of refused) fails the test instead of passing quietly.
// Under AddressSanitizer, which reserves terabytes of shadow memory, the cap
// is left out and ASan's own limits on allocation size apply.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "process.h"
#include "ssm/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define SSM_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SSM_TEST_UNDER_ASAN 1
#endif
#endif

namespace ssm::testing {

// Bytes of address space this process maps now.
inline uint64_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// fn must throw ssm::Error whose message contains needle, allocating at
// most `headroom` bytes beyond what is mapped when it starts.
inline void expect_refused(const std::function<void()>& fn, const std::string& needle,
                           uint64_t headroom = uint64_t{256} << 20) {
  const ChildResult r = run_in_child([&](int fd) {
#ifndef SSM_TEST_UNDER_ASAN
    const rlim_t cap = mapped_bytes() + headroom;
    const rlimit lim{cap, cap};
    ::setrlimit(RLIMIT_AS, &lim);
#else
    (void)headroom;
#endif
    try {
      fn();
      report(fd, "accepted");
      return 1;
    } catch (const Error& e) {
      report(fd, e.what());
      return 0;
    } catch (const std::bad_alloc&) {
      report(fd, "std::bad_alloc: tried to allocate what the input claimed");
      return 2;
    } catch (const std::exception& e) {
      report(fd, cat("not an ssm::Error: ", e.what()));
      return 3;
    }
  });
  EXPECT_EQ(r.code, 0) << r.message;
  EXPECT_NE(r.message.find(needle), std::string::npos) << r.message;
}

}  // namespace ssm::testing
