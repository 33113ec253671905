// Continuous batching: one thread owns the model and decodes every running
// request together, one token per request per step. Between steps, new
// requests join and finished or cancelled ones leave (their row's state
// moves back into their session). A joining request's pending token and
// prompt are prefilled on their own state, in chunks: each turn of the loop
// prefills at most prefill_chunk tokens (over all joining requests) before
// the batch's decode step, so that a long prompt delays the running requests
// by one chunk per token they decode, never by the whole prompt. Once
// prefilled, a request's state moves into a row of the batch. The batch
// state is kept in sizes of powers of two, so that a change of membership
// reuses a state instead of allocating one.
//
// A request computes what Generator::generate computes for one sequence:
// its pending token and prompt are consumed, then each sampled token is fed
// back until a stop; the last one stays pending. A request cancelled during
// its prefill leaves its session as it was before the request; one
// cancelled while decoding leaves it after the tokens generated so far.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ssm/model/generator.h"

namespace ssm::serve {

enum class Finish { kLength, kStop, kCancelled, kError };

struct Job {
  SessionState* session = nullptr;  // batch 1, leased by the caller for the job's life
  std::vector<int64_t> prompt;
  SamplingParams sampling;
  uint64_t seed = 0;
  int64_t max_tokens = 16;
  std::vector<int64_t> stop_tokens;
  // Called on the scheduler's thread for each sampled token; returns true
  // when the text now holds a stop string (the job then finishes).
  std::function<bool(int64_t token)> on_token;
  std::atomic<bool> cancelled{false};  // set by the client side (a disconnect)

  // Results, valid once done (finish kCancelled: tokens may be fewer than
  // max_tokens, or none when it was cancelled during its prefill).
  std::vector<int64_t> tokens;
  Finish finish = Finish::kLength;
  std::string error;
  double queued_seconds = 0, first_token_seconds = 0;

  void wait();
  // True once done; false when the time ran out first.
  bool wait_for(std::chrono::milliseconds timeout);
  bool done() const;

 private:
  friend class Scheduler;
  void complete();
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct SchedulerStats {
  int64_t queued = 0, running = 0, prefilling = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, steps = 0, batched_rows = 0;
  int64_t cancelled = 0;  // jobs stopped because their client went away
};

class Scheduler {
 public:
  // model and ctx are used only on the scheduler's thread from now on.
  Scheduler(LanguageModel& model, Context& ctx, int64_t max_batch, int64_t max_queue,
            int64_t prefill_chunk = 256);
  ~Scheduler();  // finishes every job submitted, then stops

  // False when the queue is full (the job is not taken).
  bool submit(std::shared_ptr<Job> job);
  SchedulerStats stats() const;
  int64_t max_batch() const { return max_batch_; }

 private:
  struct Running;
  void loop();
  void admit(std::vector<std::unique_ptr<Running>>& joining, size_t running);
  void prefill(std::vector<std::unique_ptr<Running>>& joining, std::vector<std::unique_ptr<Running>>& running);
  void finish(Running& r);
  void rebatch(std::vector<std::unique_ptr<Running>>& running);
  void step(std::vector<std::unique_ptr<Running>>& running);
  ModelState& batch_state(int64_t rows);

  LanguageModel& model_;
  Context& ctx_;
  const int64_t max_batch_, max_queue_, prefill_chunk_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  SchedulerStats stats_;
  std::map<int64_t, ModelState> batches_;  // by row count
  int64_t current_rows_ = 0;
  std::thread thread_;
};

}  // namespace ssm::serve
