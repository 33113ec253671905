#include "cli/bench_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/device_bounds.h"
#include "cli/json_out.h"
#include "cli/usage_error.h"
#include "ssm/train/trainer.h"

namespace ssm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct TrainRow {
  int64_t batch = 0;
  double ms_per_step = 0, tokens_per_s = 0, flops_fraction = 0;
  uint64_t peak = 0, capacity = 0;
  double loss = 0;
};

std::string gib(uint64_t bytes) { return cat(static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

int run_train_bench(const TrainBenchArgs& a) {
  Context ctx(a.backend, a.threads);
  if (a.bf16 && !(ctx.resources() && ctx.resources()->set_bf16_compute(true)))
    throw UsageError(
        cat("--bf16: backend '", a.backend, "' has no bf16 compute (use --backend cuda)"));
  const double rate = measure_linear_flops(ctx, a.bf16);
  std::vector<TrainRow> rows;
  int64_t params = 0;
  std::string family;
  bool graph = false;  // the timed steps replayed a recorded step
  for (int64_t batch : a.batches) {
    LanguageModel model = LanguageModel::load(a.model);
    model.to_device(ctx.device());
    params = model.parameter_count();
    family = model.config().family;
    // Random tokens: the speed does not depend on them.
    std::mt19937_64 rng(1);
    std::vector<int32_t> tokens(static_cast<size_t>(batch * a.seq_len * 4 + 1));
    for (int32_t& t : tokens)
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(model.config().vocab_size));
    const TrainOptions o{
        .steps = a.steps + 1, .batch = batch, .seq_len = a.seq_len, .lr = 1e-4, .warmup = 1};
    Trainer trainer(model, tokens, o, ctx);
    trainer.step();  // warm-up: workspaces grow, cuBLAS picks its kernels
    // The step graph (on by default on the GPU): the steps until one is
    // recorded are warm-up too.
    for (int i = 0; i < 4 && trainer.step_graph_on() && !trainer.step_graph_recorded(); ++i) trainer.step();
    graph = trainer.step_graph_recorded();
    const auto t0 = Clock::now();
    TrainRow row{.batch = batch};
    // Only the last step reads its loss back (waiting for the device): the
    // host queues the steps before it without waiting.
    for (int i = 0; i < a.steps; ++i) row.loss = trainer.step(i + 1 == a.steps).loss;
    const double s = seconds_since(t0) / a.steps;
    row.ms_per_step = s * 1e3;
    row.tokens_per_s = static_cast<double>(batch * a.seq_len) / s;
    row.flops_fraction = 6.0 * static_cast<double>(params) * row.tokens_per_s / rate;
    memory_use(ctx.device(), &row.peak, &row.capacity);
    rows.push_back(row);
  }
  if (a.json) {
    OrderedJson j;
    j["model"] = a.model;
    j["backend"] = a.backend;
    j["bf16"] = a.bf16;
    j["step_graph"] = graph;
    j["parameters"] = params;
    j["bound_flops"] = rate;
    for (const TrainRow& r : rows)
      j["rows"].push_back({{"batch", r.batch},
                           {"seq_len", a.seq_len},
                           {"ms_per_step", r.ms_per_step},
                           {"tokens_per_s", r.tokens_per_s},
                           {"of_bound", r.flops_fraction},
                           {"peak_bytes", r.peak},
                           {"capacity_bytes", r.capacity},
                           {"loss", r.loss}});
    print_json(j);
    return 0;
  }
  std::printf(
      "train bench: %s (%s, %lld parameters), backend %s%s%s, %d timed steps after a warm-up\n",
      a.model.c_str(), family.c_str(), static_cast<long long>(params), a.backend.c_str(),
      a.bf16 ? ", bf16 compute" : ", F32", graph ? ", each step one recorded CUDA graph" : "",
      a.steps);
  std::printf(
      "bound: %.1f TFLOP/s (%s products through the backend's linear op, measured now); "
      "6 FLOPs per parameter per token\n\n",
      rate / 1e12, ctx.device() == Device::host() ? "F32" : "bf16 tensor-core");
  std::printf(
      "| batch x length | ms/step | tokens/s | of bound | peak memory |\n|---|---|---|---|---|\n");
  for (const TrainRow& r : rows) {
    const double bound_ms = r.ms_per_step * r.flops_fraction;
    std::printf("| %lld x %lld | %.1f (bound %.1f) | %.0f (bound %.0f) | %.1f%% | %.2f GiB%s |\n",
                static_cast<long long>(r.batch), static_cast<long long>(a.seq_len), r.ms_per_step,
                bound_ms, r.tokens_per_s, r.tokens_per_s / std::max(r.flops_fraction, 1e-12),
                100.0 * r.flops_fraction, static_cast<double>(r.peak) / (1 << 30),
                r.capacity ? cat(" (", std::max(0.0, 100.0 * r.peak / r.capacity), "% of ",
                                 gib(r.capacity), " GiB)")
                                 .c_str()
                           : "");
  }
  return 0;
}

}  // namespace ssm::cli
