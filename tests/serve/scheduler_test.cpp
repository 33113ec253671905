// The scheduler in process: a long prompt is prefilled in chunks between the
// batch's decode steps (a request decoding meanwhile sees the other's state
// grow chunk by chunk, never all at once), the chunked prefill generates
// what one whole prefill does (Generator, the reference), and a request
// cancelled half-way through its prefill leaves its session exactly as it
// was before the request.
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "serve/serve_helpers.h"
#include "ssm/model/generator.h"
#include "ssm/serve/scheduler.h"

namespace ssm::testing {
namespace {

using serve::Finish;
using serve::Job;
using serve::Scheduler;

std::string model_dir(const std::string& name) { return name == "default" ? default_model() : golden_dir(name); }

std::vector<int64_t> long_prompt(int64_t n, int64_t vocab) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(1 + (i * 7 + i / 5) % (vocab - 1));
  return p;
}

std::shared_ptr<Job> greedy_job(SessionState& s, std::vector<int64_t> prompt, int64_t max_tokens) {
  auto j = std::make_shared<Job>();
  j->session = &s;
  j->prompt = std::move(prompt);
  j->sampling.temperature = 0;
  j->max_tokens = max_tokens;
  return j;
}

// What Generator::generate gives for a prompt on a session (the reference).
std::vector<int64_t> reference(LanguageModel& model, Context& ctx, SessionState& s, const std::vector<int64_t>& prompt,
                               int64_t n) {
  Generator gen(model, ctx);
  GenerationConfig cfg;
  cfg.max_new_tokens = n;
  return gen.generate(s, {prompt}, cfg)[0].tokens;
}

// Holds the scheduler's thread in a token callback until opened, so that
// the jobs submitted meanwhile are all queued before any of them decodes (on
// a loaded machine the first could otherwise finish before the next one is
// even submitted).
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  std::shared_ptr<Job> job(SessionState& s) {
    auto j = greedy_job(s, {1}, 1);
    j->on_token = [f = opened](int64_t) {
      f.wait();
      return false;
    };
    return j;
  }
};

class ServeScheduler : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeScheduler, LongPromptIsPrefilledInChunksBetweenDecodeSteps) {
  LanguageModel model = LanguageModel::load(model_dir(GetParam()));
  Context ctx(1);
  const int64_t V = model.config().vocab_size;
  const std::vector<int64_t> short_prompt = {65, 110, 100, 32};
  const std::vector<int64_t> big = long_prompt(300, V);
  SessionState sa = make_session(model, 1), sb = make_session(model, 1);
  std::vector<int64_t> seen;  // b's tokens in its state at each of a's tokens
  auto a = greedy_job(sa, short_prompt, 40);
  a->on_token = [&](int64_t) {
    seen.push_back(sb.consumed[0]);
    return false;
  };
  auto b = greedy_job(sb, big, 6);
  {
    Scheduler sched(model, ctx, 4, 8, /*prefill_chunk=*/16);
    SessionState sg = make_session(model, 1);
    Gate gate;
    ASSERT_TRUE(sched.submit(gate.job(sg)));
    ASSERT_TRUE(sched.submit(a));
    ASSERT_TRUE(sched.submit(b));
    gate.open.set_value();
    a->wait();
    b->wait();
    EXPECT_EQ(sched.stats().prompt_tokens, static_cast<int64_t>(1 + short_prompt.size() + big.size()));
  }
  ASSERT_EQ(a->finish, Finish::kLength) << a->error;
  ASSERT_EQ(b->finish, Finish::kLength) << b->error;
  std::set<int64_t> partial;
  for (const int64_t n : seen)
    if (n > 0 && n < static_cast<int64_t>(big.size())) partial.insert(n);
  // 300 tokens in chunks of at most 16: a decodes a token between any two.
  EXPECT_GE(partial.size(), 15u) << "the long prompt was not prefilled in chunks between a's decode steps";
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LE(seen[i] - seen[i - 1], 16) << "at a's token " << i;

  // Each equals its generation alone with one whole prefill.
  SessionState ra = make_session(model, 1), rb = make_session(model, 1);
  EXPECT_EQ(a->tokens, reference(model, ctx, ra, short_prompt, 40));
  EXPECT_EQ(b->tokens, reference(model, ctx, rb, big, 6));
  EXPECT_EQ(sb.consumed[0], rb.consumed[0]);
}

TEST_P(ServeScheduler, CancelDuringPrefillLeavesTheSessionAsBefore) {
  LanguageModel model = LanguageModel::load(model_dir(GetParam()));
  Context ctx(1);
  const int64_t V = model.config().vocab_size;
  // Two sessions with the same history: one gets a long request that is
  // cancelled during its prefill, the other not; they must go on alike.
  SessionState s = make_session(model, 1), twin = make_session(model, 1);
  SessionState sa = make_session(model, 1);
  Scheduler sched(model, ctx, 4, 8, /*prefill_chunk=*/16);
  for (SessionState* x : {&s, &twin}) {
    auto j = greedy_job(*x, {3, 17, 42}, 4);
    ASSERT_TRUE(sched.submit(j));
    j->wait();
  }
  const int64_t before = s.consumed[0];
  const int64_t pending = s.pending[0];
  ASSERT_GE(pending, 0);
  auto cut = greedy_job(s, long_prompt(400, V), 8);
  int64_t seen_at_cancel = -1;
  auto a = greedy_job(sa, {10, 20}, 60);
  a->on_token = [&](int64_t) {
    if (seen_at_cancel < 0 && s.consumed[0] > before + 40) {
      seen_at_cancel = s.consumed[0];
      cut->cancelled = true;
    }
    return false;
  };
  SessionState sg = make_session(model, 1);
  Gate gate;
  ASSERT_TRUE(sched.submit(gate.job(sg)));
  ASSERT_TRUE(sched.submit(a));
  ASSERT_TRUE(sched.submit(cut));
  gate.open.set_value();
  cut->wait();
  a->wait();
  ASSERT_GT(seen_at_cancel, before) << "the cancel never came during the prefill";
  EXPECT_EQ(cut->finish, Finish::kCancelled);
  EXPECT_TRUE(cut->tokens.empty());
  EXPECT_EQ(s.consumed[0], before);
  EXPECT_EQ(s.pending[0], pending);
  EXPECT_EQ(sched.stats().cancelled, 1);
  // The same continuation from both.
  auto next = greedy_job(s, {5, 6, 7}, 10), next_twin = greedy_job(twin, {5, 6, 7}, 10);
  ASSERT_TRUE(sched.submit(next));
  ASSERT_TRUE(sched.submit(next_twin));
  next->wait();
  next_twin->wait();
  EXPECT_EQ(next->tokens, next_twin->tokens);
  EXPECT_EQ(s.consumed[0], twin.consumed[0]);
}

INSTANTIATE_TEST_SUITE_P(Models, ServeScheduler, ::testing::Values("default", "mamba2_hf_tiny", "hybrid_tiny"));

}  // namespace
}  // namespace ssm::testing
