#include "ssm/serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "ssm/core/error.h"

namespace ssm::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t rows_for(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

void Job::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool Job::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

bool Job::done() const {
  const std::lock_guard lock(mutex_);
  return done_;
}

void Job::complete() {
  const std::lock_guard lock(mutex_);
  done_ = true;
  cv_.notify_all();
}

// A job joining the batch (its prompt being prefilled) or in it: its
// sampler, history and next-token logits.
struct Scheduler::Running {
  std::shared_ptr<Job> job;
  Sampler sampler;
  std::vector<int64_t> history;  // the session's recent tokens, then this job's
  std::vector<float> logits;     // next-token logits, (V)
  int64_t row = -1;              // its row of the batch state, -1: its state is in the session
  bool finished = false;
  Clock::time_point submitted;
  // The prefill: the pending token and the prompt, and how many of them the
  // state holds. A prefill of several chunks keeps the state from before
  // the request, to go back to if the request is cancelled half-way.
  std::vector<int64_t> feed;
  size_t fed = 0;
  bool prefilled = false;
  std::optional<ModelState> before;
  int64_t before_consumed = 0, before_pending = -1;
};

Scheduler::Scheduler(LanguageModel& model, Context& ctx, int64_t max_batch, int64_t max_queue, int64_t prefill_chunk)
    : model_(model), ctx_(ctx), max_batch_(std::max<int64_t>(max_batch, 1)),
      max_queue_(std::max<int64_t>(max_queue, 1)), prefill_chunk_(std::max<int64_t>(prefill_chunk, 1)) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    const std::lock_guard lock(mutex_);
    if (static_cast<int64_t>(queue_.size()) >= max_queue_) return false;
    job->queued_seconds = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    queue_.push_back(std::move(job));
    stats_.queued = static_cast<int64_t>(queue_.size());
  }
  wake_.notify_all();
  return true;
}

SchedulerStats Scheduler::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

ModelState& Scheduler::batch_state(int64_t rows) {
  auto it = batches_.find(rows);
  if (it == batches_.end()) it = batches_.emplace(rows, model_.make_state(rows)).first;
  return it->second;
}

void Scheduler::admit(std::vector<std::unique_ptr<Running>>& joining, size_t running) {
  const int64_t V = model_.config().vocab_size;
  while (static_cast<int64_t>(running + joining.size()) < max_batch_) {
    std::shared_ptr<Job> job;
    {
      const std::lock_guard lock(mutex_);
      if (queue_.empty()) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      stats_.queued = static_cast<int64_t>(queue_.size());
    }
    const double submitted = job->queued_seconds;
    const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    job->queued_seconds = now - submitted;
    SessionState& s = *job->session;
    try {
      job->sampling.validate();
      std::vector<int64_t> seq;
      if (s.pending[0] >= 0) seq.push_back(s.pending[0]);
      seq.insert(seq.end(), job->prompt.begin(), job->prompt.end());
      if (seq.empty()) throw Error("the request has no token to start from");
      auto r = std::make_unique<Running>(
          Running{job, Sampler(V, job->sampling, job->seed), s.recent[0], std::vector<float>(static_cast<size_t>(V))});
      r->history.insert(r->history.end(), job->prompt.begin(), job->prompt.end());
      r->submitted = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(job->queued_seconds));
      r->feed = std::move(seq);
      joining.push_back(std::move(r));
    } catch (const std::exception& e) {
      job->error = e.what();
      job->finish = Finish::kError;
      job->complete();
    }
  }
}

void Scheduler::prefill(std::vector<std::unique_ptr<Running>>& joining, std::vector<std::unique_ptr<Running>>& running) {
  const int64_t V = model_.config().vocab_size;
  int64_t budget = prefill_chunk_;
  for (auto it = joining.begin(); it != joining.end() && budget > 0;) {
    Running& r = **it;
    Job& job = *r.job;
    SessionState& s = *job.session;
    const auto restore = [&] {
      if (!r.before) return;
      copy_state_row(s.model, 0, *r.before, 0, ctx_);
      s.consumed[0] = r.before_consumed;
      s.pending[0] = r.before_pending;
      s.model.position = s.consumed[0];
    };
    if (job.cancelled.load()) {  // between two chunks: the session goes back to before the request
      restore();
      job.finish = Finish::kCancelled;
      finish(r);
      it = joining.erase(it);
      continue;
    }
    const int64_t left = static_cast<int64_t>(r.feed.size() - r.fed);
    const int64_t n = std::min(left, budget);
    try {
      if (r.fed == 0 && n < left) {
        r.before = model_.make_state(1);
        copy_state_row(*r.before, 0, s.model, 0, ctx_);
        r.before_consumed = s.consumed[0];
        r.before_pending = s.pending[0];
      }
      Tensor ids = Tensor::empty(DType::kI64, {1, n});
      std::copy_n(r.feed.begin() + static_cast<std::ptrdiff_t>(r.fed), n, ids.data<int64_t>());
      const Tensor logits = model_.forward(ids, &s.model, ctx_, true);
      s.consumed[0] += n;
      s.model.position = s.consumed[0];
      s.pending[0] = -1;
      r.fed += static_cast<size_t>(n);
      budget -= n;
      {
        const std::lock_guard lock(mutex_);
        stats_.prompt_tokens += n;
      }
      if (r.fed < r.feed.size()) {
        ++it;
        continue;
      }
      // A device replica's logits come back to the host, where the sampler reads them.
      const Tensor host = logits.device().is_host() ? logits : logits.to(Device::host());
      std::copy_n(host.data<float>(), V, r.logits.data());
    } catch (const std::exception& e) {
      restore();
      job.error = e.what();
      job.finish = Finish::kError;
      job.complete();
      it = joining.erase(it);
      continue;
    }
    r.before.reset();
    r.prefilled = true;
    if (job.max_tokens == 0) r.finished = true;
    running.push_back(std::move(*it));
    it = joining.erase(it);
  }
}

void Scheduler::finish(Running& r) {
  if (r.row >= 0) copy_state_row(r.job->session->model, 0, batch_state(current_rows_), r.row, ctx_);
  const size_t keep = std::min<size_t>(r.history.size(), kSessionHistory);
  if (r.prefilled)  // a job cancelled during its prefill leaves its session's history alone
    r.job->session->recent[0].assign(r.history.end() - static_cast<std::ptrdiff_t>(keep), r.history.end());
  if (r.job->finish == Finish::kCancelled) {
    const std::lock_guard lock(mutex_);
    ++stats_.cancelled;
  }
  r.job->complete();
}

void Scheduler::rebatch(std::vector<std::unique_ptr<Running>>& running) {
  const int64_t n = static_cast<int64_t>(running.size());
  if (n == 0) return;
  const int64_t rows = rows_for(n);
  if (rows != current_rows_) {
    // A new size: every row moves out to its session, then into the new state.
    if (current_rows_ > 0) {
      ModelState& old = batch_state(current_rows_);
      for (auto& r : running)
        if (r->row >= 0) copy_state_row(r->job->session->model, 0, old, r->row, ctx_);
    }
    for (auto& r : running) r->row = -1;
    current_rows_ = rows;
  }
  ModelState& batch = batch_state(current_rows_);
  std::vector<char> used(static_cast<size_t>(current_rows_), 0);
  for (auto& r : running)
    if (r->row >= 0) used[r->row] = 1;
  int64_t free_row = 0;
  for (auto& r : running) {
    if (r->row >= 0) continue;
    while (used[free_row]) ++free_row;
    r->row = free_row;
    used[free_row] = 1;
    copy_state_row(batch, r->row, r->job->session->model, 0, ctx_);
  }
}

void Scheduler::step(std::vector<std::unique_ptr<Running>>& running) {
  const int64_t V = model_.config().vocab_size;
  // Sample each job's next token from its logits; some finish.
  for (auto& r : running) {
    if (r->finished) continue;
    Job& job = *r->job;
    const int64_t last_n = std::min<int64_t>(r->sampler.params().repeat_last_n,
                                             static_cast<int64_t>(r->history.size()));
    const int64_t tok = r->sampler.sample(r->logits.data(),
                                          std::span<const int64_t>(r->history).subspan(r->history.size() - last_n));
    if (job.tokens.empty()) job.first_token_seconds = seconds_between(r->submitted, Clock::now());
    job.tokens.push_back(tok);
    {
      const std::lock_guard lock(mutex_);
      ++stats_.generated_tokens;
    }
    r->history.push_back(tok);
    if (r->history.size() > static_cast<size_t>(4 * kSessionHistory))
      r->history.erase(r->history.begin(), r->history.end() - kSessionHistory);
    job.session->pending[0] = tok;
    const bool stop_token = std::find(job.stop_tokens.begin(), job.stop_tokens.end(), tok) != job.stop_tokens.end();
    const bool stop_string = job.on_token && job.on_token(tok);
    if (stop_token || stop_string) {
      job.finish = Finish::kStop;
      r->finished = true;
    } else if (static_cast<int64_t>(job.tokens.size()) >= job.max_tokens) {
      job.finish = Finish::kLength;
      r->finished = true;
    } else if (job.cancelled.load()) {
      job.finish = Finish::kCancelled;
      r->finished = true;
    }
  }
  // Finished jobs leave with their state; the last token stays pending.
  for (auto it = running.begin(); it != running.end();) {
    Running& r = **it;
    if (!r.finished) {
      ++it;
      continue;
    }
    finish(r);
    it = running.erase(it);
  }
  if (running.empty()) return;
  rebatch(running);
  // One decode step for the whole batch; rows no job holds decode a dummy.
  ModelState& batch = batch_state(current_rows_);
  std::vector<int64_t> feed(static_cast<size_t>(current_rows_), 0);
  for (auto& r : running) feed[r->row] = r->job->session->pending[0];
  Tensor& out = model_.step(feed.data(), batch, ctx_);
  // The step's rows are padded (LanguageModel::step); a copy to the host
  // is dense.
  Tensor host_logits;
  if (!out.device().is_host()) host_logits = out.to(Device::host());
  const Tensor& rows = out.device().is_host() ? out : host_logits;
  const float* logits = rows.data<float>();
  const int64_t ld = rows.row_stride();
  for (auto& r : running) {
    std::memcpy(r->logits.data(), logits + r->row * ld, static_cast<size_t>(V) * sizeof(float));
    SessionState& s = *r->job->session;
    ++s.consumed[0];
    s.model.position = s.consumed[0];
    s.pending[0] = -1;
  }
  const std::lock_guard lock(mutex_);
  ++stats_.steps;
  stats_.batched_rows += static_cast<int64_t>(running.size());
  stats_.running = static_cast<int64_t>(running.size());
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Running>> running, joining;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      stats_.running = static_cast<int64_t>(running.size());
      stats_.prefilling = static_cast<int64_t>(joining.size());
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running.empty() || !joining.empty(); });
      if (stopping_ && queue_.empty() && running.empty() && joining.empty()) return;
    }
    try {
      admit(joining, running.size());
      prefill(joining, running);
      step(running);
    } catch (const std::exception& e) {
      // An engine failure fails the jobs in flight, never the server.
      for (auto* list : {&running, &joining})
        for (auto& r : *list) {
          r->job->error = e.what();
          r->job->finish = Finish::kError;
          r->job->complete();
        }
      running.clear();
      joining.clear();
      current_rows_ = 0;
    }
  }
}

}  // namespace ssm::serve
