// Prefill throughput (tokens/s) of 130m-shaped models with random weights:
// Mamba-2, Mamba-3 SISO and Mamba-3 MIMO (R = 4); d_model 768, 24 layers,
// d_state 128, headdim 64, vocabulary 50288. One prefill of batch x length
// tokens per iteration, logits of the last position only (what generation
// needs), on SSM_BENCH_THREADS threads (default 2).
//   build-m3/bench/prefill_bench --benchmark_filter=Prefill
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "config_130m.h"
#include "ssm/model/language_model.h"

namespace ssm {
namespace {

using bench::config_130m;

// Small random weights, with the vectors that set time scales, decays and
// norms near their reference initialisation so the activations stay in a
// realistic range.
void fill_weights(LanguageModel& model, int64_t rank) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> small(-0.02f, 0.02f), unit(0.f, 1.f);
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  model.for_each_param([&](const std::string& name, Param& p) {
    p.value = Tensor::empty(DType::kF32, p.shape);
    float* v = p.value.data<float>();
    const int64_t n = p.value.numel();
    for (int64_t i = 0; i < n; ++i) {
      float x = small(rng);
      if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight") ||
          ends_with(name, ".D") || ends_with(name, "_bias") || ends_with(name, "mimo_z"))
        x += 1.f;
      if (ends_with(name, "dt_bias")) x = -3.f + 2.f * unit(rng);  // dt ~ 0.05 .. 0.3
      if (ends_with(name, "A_log")) x = std::log(1.f + 15.f * unit(rng));
      if (ends_with(name, "mimo_x") || ends_with(name, "mimo_o"))
        x += 1.f / static_cast<float>(rank);
      v[i] = x;
    }
  });
}

int bench_threads() {
  const char* env = std::getenv("SSM_BENCH_THREADS");
  return env ? std::atoi(env) : 2;
}

void run_prefill(benchmark::State& state, const std::string& layer, bool mimo) {
  const int64_t B = state.range(0), L = state.range(1);
  LanguageModel model(config_130m(layer, mimo));
  fill_weights(model, mimo ? 4 : 1);
  Tensor ids = Tensor::empty(DType::kI64, {B, L});
  std::mt19937 rng(7);
  for (int64_t i = 0; i < B * L; ++i) ids.data<int64_t>()[i] = rng() % 50277;
  Context ctx(bench_threads());
  for (auto _ : state) {
    ModelState st = model.make_state(B);
    Tensor logits = model.forward(ids, &st, ctx, /*last_only=*/true);
    benchmark::DoNotOptimize(logits.data<float>());
  }
  state.SetItemsProcessed(state.iterations() * B * L);
  state.counters["threads"] = ctx.threads();
  state.counters["params_M"] = static_cast<double>(model.parameter_count()) / 1e6;
}

void BM_PrefillMamba2_130m(benchmark::State& s) { run_prefill(s, "Mamba2", false); }
void BM_PrefillMamba3Siso_130m(benchmark::State& s) { run_prefill(s, "Mamba3", false); }
void BM_PrefillMamba3MimoR4_130m(benchmark::State& s) { run_prefill(s, "Mamba3", true); }

BENCHMARK(BM_PrefillMamba2_130m)
    ->Args({1, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_PrefillMamba3Siso_130m)
    ->Args({1, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_PrefillMamba3MimoR4_130m)
    ->Args({1, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace
}  // namespace ssm

BENCHMARK_MAIN();
