// Decoding calls parallel_for about a hundred times per token, each for tens
// of microseconds of work, so waking a sleeping worker (a futex call and a
// reschedule each way, several microseconds) was a large part of a token.
// Workers and the caller therefore spin for a short while (spin_setting) on the
// generation and pending counts before they block on the condition
// variables. The counts are plain members of the class, accessed through
// AtomicRef (std::atomic_ref); a caller publishes a loop by bumping the generation under
// the mutex, so a worker about to block sees it in its wait's predicate.
#include "ssm/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/atomic_ref_compat.h"
#include "ssm/core/error.h"

namespace ssm {
namespace {
thread_local bool t_inside_pool = false;

// How long a worker waits for the next loop, and the caller for the workers,
// before blocking: longer than the gaps between a decode step's loops (the
// small ops the caller runs alone), short enough that an idle pool gives the
// cores back at once for practical purposes. SSM_POOL_SPIN_US sets it and
// makes the pool spin whatever the load (0: block at once, as before); for
// measuring what the spin buys, and for testing the spinning path.
struct SpinSetting {
  std::chrono::microseconds time{100};
  bool forced = false;
};
const SpinSetting& spin_setting() {
  static const SpinSetting s = [] {
    SpinSetting v;
    if (const char* env = std::getenv("SSM_POOL_SPIN_US")) {
      v.time = std::chrono::microseconds(std::max(0, std::atoi(env)));
      v.forced = true;
    }
    return v;
  }();
  return s;
}

void range_of(int64_t n, int parts, int index, int64_t& begin, int64_t& end) {
  const int64_t base = n / parts, extra = n % parts;
  begin = index * base + std::min<int64_t>(index, extra);
  end = begin + base + (index < extra ? 1 : 0);
}

// Whether parallel_for_dynamic hands out its ranges as the threads come
// free (default), or splits statically as parallel_for (SSM_POOL_DYNAMIC=0:
// to measure what the dynamic split buys, in the same binary).
bool dynamic_split_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("SSM_POOL_DYNAMIC");
    return !(env && std::atoi(env) == 0);
  }();
  return on;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Whether the machine has a core for each runnable thread: spinning only
// pays then. With more runnable threads than cores (other programs busy) a
// spinning thread takes the CPU from the very thread it waits for, and the
// scheduler favours threads that wake from sleep over those that ran all
// along: decoding measured 2.5x slower spinning than blocking at a load of 16
// on 2 cores. Read from /proc/loadavg (runnable threads, ours included) at
// most every 20 ms; elsewhere than Linux, assumed true.
bool cores_to_spare() {
  static std::atomic<int64_t> checked_ns{-1};
  static std::atomic<bool> spare{true};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = checked_ns.load(std::memory_order_relaxed);
  if (last >= 0 && now - last < 20'000'000) return spare.load(std::memory_order_relaxed);
  if (!checked_ns.compare_exchange_strong(last, now, std::memory_order_relaxed))
    return spare.load(std::memory_order_relaxed);  // another thread is reading it
#if defined(__linux__)
  // "0.50 0.40 0.30 R/T LAST": R runnable scheduling entities now.
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    double l1, l5, l15;
    long running = 0, total = 0;
    if (std::fscanf(f, "%lf %lf %lf %ld/%ld", &l1, &l5, &l15, &running, &total) == 5) {
      const long cores = static_cast<long>(std::max(1u, std::thread::hardware_concurrency()));
      spare.store(running <= cores, std::memory_order_relaxed);
    }
    std::fclose(f);
  }
#endif
  return spare.load(std::memory_order_relaxed);
}

// Spins until done() or the spin time has passed (by default not at all
// without cores to spare); returns done().
template <typename Done>
bool spin_until(Done&& done) {
  const SpinSetting& spin = spin_setting();
  if (spin.time.count() == 0 || (!spin.forced && !cores_to_spare())) return done();
  const auto deadline = std::chrono::steady_clock::now() + spin.time;
  for (int i = 0;; ++i) {
    if (done()) return true;
    // A few pauses first (the other side is usually a few hundred
    // nanoseconds away), then yields: on a loaded machine the thread waited
    // for may be off the CPU, and a thread that only spins would keep it off.
    if (i < 64)
      cpu_relax();
    else
      std::this_thread::yield();
    if ((i & 15) == 15 && std::chrono::steady_clock::now() > deadline) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    AtomicRef(stop_).store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  t_inside_pool = true;
  const AtomicRef stop(stop_);
  const AtomicRef generation(generation_);
  const AtomicRef pending(pending_);
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop.load(std::memory_order_acquire) ||
             generation.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready)) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, ready);
    }
    if (stop.load(std::memory_order_acquire)) return;
    // task_ and task_n_ were written before the generation was published,
    // and stay unchanged until every worker has counted itself done.
    seen = generation.load(std::memory_order_acquire);
    try {
      run_share(task_, task_n_, task_split_, index);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex: the caller checks pending_ under it before it waits.
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run_share(RangeFn fn, int64_t n, Split split, int index) {
  if (split == Split::kStatic) {
    int64_t begin, end;
    range_of(n, n_threads_, index, begin, end);
    if (begin < end) fn(begin, end);
    return;
  }
  // Guided self-scheduling: each claim takes 1 / (2 x threads) of what is
  // left (at least one index), so the first claims are long runs (few
  // atomic operations, long streams for the prefetchers) and the last ones
  // single indices.
  const AtomicRef next(next_);
  const int64_t parts = 2 * int64_t{n_threads_};
  int64_t begin = next.load(std::memory_order_relaxed);
  while (begin < n) {
    const int64_t end = begin + std::max<int64_t>(1, (n - begin) / parts);
    if (next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) {
      fn(begin, end);
      begin = next.load(std::memory_order_relaxed);
    }
  }
}

void ThreadPool::run(int64_t n, RangeFn fn, Split split) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  // No worker is running a task here (the last call waited for all of them),
  // so these are written without the lock.
  task_ = fn;
  task_n_ = n;
  task_split_ =
      split == Split::kDynamic && dynamic_split_enabled() ? Split::kDynamic : Split::kStatic;
  AtomicRef(next_).store(0, std::memory_order_relaxed);
  error_ = nullptr;
  const AtomicRef pending(pending_);
  pending.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    AtomicRef(generation_).fetch_add(1, std::memory_order_release);
  }
  // Without a blocked worker this makes no system call (glibc).
  wake_.notify_all();
  std::exception_ptr err;
  t_inside_pool = true;
  try {
    run_share(fn, n, task_split_, 0);
  } catch (...) {
    err = std::current_exception();
  }
  t_inside_pool = false;
  auto done = [&] { return pending.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, done);
  }
  if (!err) {
    std::lock_guard lock(mutex_);
    err = error_;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace ssm
