#include "ssm/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ssm/core/error.h"

namespace ssm {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n;
    }
  }
}

TEST(ThreadPool, RethrowsWorkerExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100, [](int64_t b, int64_t) {
    if (b > 0) throw Error("worker failed");
  }), Error);
  // The pool stays usable afterwards.
  std::atomic<int64_t> sum = 0;
  pool.parallel_for(10, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 10);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total = 0;
  pool.parallel_for(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(3, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 12);
}

TEST(ThreadPool, DynamicSplitCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_ranges = 0;
      pool.parallel_for_dynamic(n, [&](int64_t b, int64_t e) {
        if (b < 0 || e > n || b >= e) bad_ranges++;
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      EXPECT_EQ(bad_ranges.load(), 0);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n;
    }
  }
}

// The point of the dynamic split: while one thread is held up inside its
// range, the others take what is left. A worker that gets a range stops in
// it until more than half of the indices are done elsewhere: with a static
// split the caller does exactly half and then waits for the worker, so the
// worker gives up after 20 s and the test fails instead of hanging. Nothing
// here depends on timing when the split is right (the worker's first claim
// is at most a quarter of the loop; the caller takes all the rest).
TEST(ThreadPool, DynamicSplitLetsOthersTakeWhatAHeldUpThreadLeaves) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 20; ++round) {
    const int64_t n = 1000;
    std::atomic<int64_t> done = 0;
    std::atomic<bool> worker_held = false, worker_gave_up = false;
    pool.parallel_for_dynamic(n, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller && !worker_held.exchange(true)) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (done.load() <= n / 2) {
          if (std::chrono::steady_clock::now() > deadline) {
            worker_gave_up = true;
            break;
          }
          std::this_thread::yield();
        }
      }
      done += e - b;
    });
    EXPECT_EQ(done.load(), n);
    ASSERT_FALSE(worker_gave_up.load()) << "round " << round;
  }
}

TEST(ThreadPool, DynamicSplitRethrowsAndNestsInline) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for_dynamic(100, [](int64_t b, int64_t) {
    if (b > 0) throw Error("worker failed");
  }), Error);
  std::atomic<int64_t> total = 0;
  pool.parallel_for_dynamic(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for_dynamic(3, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 12);
}

}  // namespace
}  // namespace ssm
