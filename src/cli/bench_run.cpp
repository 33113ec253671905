#include "cli/bench_run.h"

#include <chrono>
#include <cmath>

namespace ssm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Prompt ids spread over the vocabulary (any ids do: the cost does not
// depend on them).
Tensor prompt_ids(int64_t batch, int64_t length, int64_t vocab) {
  Tensor ids = Tensor::empty(DType::kI64, {batch, length});
  int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < batch * length; ++i) p[i] = (i * 7919 + 13) % vocab;
  return ids;
}

struct OneRun {
  double prefill_s = 0, decode_s = 0;
};

OneRun run_once(LanguageModel& model, Context& ctx, const BenchCase& c, const Tensor& ids,
                const std::vector<int64_t>& tokens, const std::atomic<bool>* interrupt) {
  OneRun r;
  ModelState state = model.make_state(c.batch);
  reserve_state(state, c.prompt + c.decode, ctx);
  // Each timed part ends with its logits on the host, as generation wants
  // them: on a device, where ops only queue work, that read waits for it.
  if (c.prompt > 0) {
    const auto t0 = Clock::now();
    model.forward(ids, &state, ctx, /*last_only=*/true).to(Device::host());
    r.prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < c.decode; ++i) {
    if (interrupt && interrupt->load()) return {};
    const Tensor& logits = model.step(tokens.data(), state, ctx);
    if (i + 1 == c.decode) logits.to(Device::host());
  }
  r.decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace

BenchTimes run_bench_case(LanguageModel& model, Context& ctx, const BenchCase& c,
                          const std::atomic<bool>* interrupt) {
  const int64_t vocab = model.config().vocab_size;
  const Tensor ids = c.prompt > 0 ? prompt_ids(c.batch, c.prompt, vocab) : Tensor();
  std::vector<int64_t> tokens(static_cast<size_t>(c.batch));
  for (int64_t b = 0; b < c.batch; ++b) tokens[b] = (b * 31 + 7) % vocab;
  BenchTimes times;
  run_once(model, ctx, c, ids, tokens, interrupt);  // warm-up
  for (int rep = 0; rep < c.repetitions; ++rep) {
    if (interrupt && interrupt->load()) break;
    const OneRun r = run_once(model, ctx, c, ids, tokens, interrupt);
    if (interrupt && interrupt->load()) break;
    if (c.prompt > 0) times.prefill.push_back(static_cast<double>(c.batch * c.prompt) / r.prefill_s);
    if (c.decode > 0) times.decode.push_back(static_cast<double>(c.batch * c.decode) / r.decode_s);
  }
  return times;
}

MeanDeviation mean_deviation(const std::vector<double>& values) {
  MeanDeviation m;
  if (values.empty()) return m;
  for (double v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  if (values.size() < 2) return m;
  double ss = 0;
  for (double v : values) ss += (v - m.mean) * (v - m.mean);
  m.deviation = std::sqrt(ss / static_cast<double>(values.size() - 1));
  return m;
}

}  // namespace ssm::cli
