// Training throughput: tokens per second of full optimizer steps (forward,
// layer-recomputing backward, clipping, AdamW) on a 130m-shaped Mamba-2
// model (d_model 768, d_state 128, headdim 64, vocabulary 50280) and a
// 130m-shaped Mamba-3 SISO model (the same widths, vocabulary 50288) at batch
// 4 x 512 on 2 threads. The layer count is an argument: 24 is the real 130m;
// fewer layers give a quicker per-layer figure.
#include <benchmark/benchmark.h>

#include <ctime>
#include <random>

#include "ssm/train/init.h"
#include "ssm/train/trainer.h"

namespace ssm {
namespace {

ModelConfig config_130m(int64_t n_layer) {
  const Json j = {
      {"d_model", 768},
      {"n_layer", n_layer},
      {"vocab_size", 50280},
      {"pad_vocab_size_multiple", 16},
      {"d_intermediate", 0},
      {"attn_layer_idx", Json::array()},
      {"attn_cfg", Json::object()},
      {"ssm_cfg", {{"layer", "Mamba2"}, {"d_state", 128}, {"headdim", 64}, {"chunk_size", 256}}},
      {"tie_embeddings", true}};
  return parse_model_config(j, "130m-shaped bench config");
}

ModelConfig config_130m_mamba3(int64_t n_layer) {
  const Json j = {
      {"d_model", 768},
      {"n_layer", n_layer},
      {"vocab_size", 50288},
      {"pad_vocab_size_multiple", 16},
      {"d_intermediate", 0},
      {"attn_layer_idx", Json::array()},
      {"attn_cfg", Json::object()},
      {"ssm_cfg", {{"layer", "Mamba3"}, {"d_state", 128}, {"headdim", 64}, {"is_mimo", false}}},
      {"tie_embeddings", true}};
  return parse_model_config(j, "130m-shaped Mamba-3 bench config");
}

// CPU seconds of all the process's threads so far.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void train_steps(benchmark::State& state, const ModelConfig& config, int64_t vocab) {
  const int64_t batch = 4, seq_len = 512;
  LanguageModel model(config);
  initialize_model(model, 1);
  std::vector<int32_t> tokens(1 << 16);
  std::mt19937 rng(1);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  Context ctx(2);
  Trainer trainer(
      model, tokens,
      TrainOptions{.steps = 1 << 20, .batch = batch, .seq_len = seq_len, .lr = 1e-4, .warmup = 10},
      ctx);
  // Two steps before the timed ones: the first sizes the arenas, whose
  // blocks then merge into one fresh block each; the second touches that
  // block's pages (page faults, about a tenth of a step on this machine's
  // hypervisor). From the third step on nothing is allocated or faulted in.
  trainer.step();
  trainer.step();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step().loss);
  const double cpu_s = process_cpu_seconds() - cpu0;
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * batch * seq_len), benchmark::Counter::kIsRate);
  // On a shared machine the wall-clock rate follows the load; the CPU time
  // of all the process's threads per step does much less.
  state.counters["cpu_s/step"] = cpu_s / static_cast<double>(state.iterations());
  state.counters["tokens/cpu_s"] =
      static_cast<double>(state.iterations() * batch * seq_len) / cpu_s;
  state.counters["params_M"] = static_cast<double>(model.parameter_count()) / 1e6;
}

void BM_TrainStep130m(benchmark::State& state) {
  train_steps(state, config_130m(state.range(0)), 50280);
}
BENCHMARK(BM_TrainStep130m)
    ->Arg(2)
    ->Arg(24)
    ->Iterations(2)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

void BM_TrainStep130mMamba3(benchmark::State& state) {
  train_steps(state, config_130m_mamba3(state.range(0)), 50288);
}
BENCHMARK(BM_TrainStep130mMamba3)
    ->Arg(2)
    ->Arg(24)
    ->Iterations(2)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ssm
BENCHMARK_MAIN();
