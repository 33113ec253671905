// Decode throughput (tokens/s) of 130m-shaped models with random weights
// (d_model 768, 24 layers, d_state 128, headdim 64, vocabulary 50277 padded
// to 50288): Mamba-2, Mamba-3 SISO and MIMO R = 4, batch 1 and 8, projections in F32,
// BF16 or int8 (second argument 0, 1, 2), one LanguageModel::step per
// iteration on SSM_BENCH_THREADS threads (default 2). With
// SSM_BENCH_THREADS=1 the CPU column is the whole step's CPU time, which a
// loaded machine disturbs far less than the wall time.
// Before the benchmarks it measures the machine's memory bandwidth (a
// streaming read over 1 GiB on the same threads, and a 1 GiB memcpy) and
// prints the batch-1 bound: the bytes a decode step must read (every weight
// once, the tied head over the real vocabulary; then also the recurrent
// state, read and written) divided by that bandwidth.
//   build-gen/bench/decode_bench --benchmark_filter=Decode
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "config_130m.h"
#include "ssm/model/language_model.h"

namespace ssm {
namespace {

int bench_threads() {
  const char* env = std::getenv("SSM_BENCH_THREADS");
  return env ? std::atoi(env) : 2;
}

using bench::config_130m;

// Small random weights; the vectors that set time scales, decays and norms
// near their reference initialisation.
void fill_weights(LanguageModel& model) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> small(-0.02f, 0.02f), unit(0.f, 1.f);
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  model.for_each_param([&](const std::string& name, Param& p) {
    p.value = Tensor::empty(DType::kF32, p.shape);
    float* v = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      float x = small(rng);
      if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight") ||
          ends_with(name, ".D") || ends_with(name, "_bias"))
        x += 1.f;
      if (ends_with(name, "dt_bias")) x = -3.f + 2.f * unit(rng);
      if (ends_with(name, "A_log")) x = std::log(1.f + 15.f * unit(rng));
      v[i] = x;
    }
  });
}

// Bytes one batch-1 step reads from weights: everything once, but of the
// tied embedding only the real-vocabulary rows the head multiplies by; the
// 2-D weights in `dtype` (int8 with a 4-byte scale per row), the rest F32.
double weight_bytes_per_token(LanguageModel& model, DType dtype = DType::kF32) {
  const ModelConfig& c = model.config();
  double bytes = 0;
  model.for_each_param([&](const std::string& name, Param& p) {
    const bool matrix = p.shape.size() == 2 && p.role == ParamRole::kWeight;
    const double size = matrix ? static_cast<double>(dtype_size(dtype)) : 4.0;
    const double rows = name == c.embedding_name() && c.tie_embeddings
                            ? static_cast<double>(c.vocab_size)
                            : static_cast<double>(p.shape[0]);
    const double cols = static_cast<double>(shape_numel(p.shape)) / static_cast<double>(p.shape[0]);
    bytes += rows * cols * size + (matrix && dtype == DType::kQ8 ? 4.0 * rows : 0.0);
  });
  return bytes;
}

double state_bytes_per_sequence(const LanguageModel& model) {
  ModelState s = model.make_state(1);
  double bytes = 0;
  for (auto& l : s.layers)
    if (l)
      for (auto& [name, t] : l->tensors()) bytes += static_cast<double>(t->nbytes());
  return bytes;
}

struct Bandwidth {
  double read_gbs = 0, memcpy_gbs = 0;
};

// Best of several passes: a streaming sum over 1 GiB split over the pool,
// and one memcpy of 1 GiB (counting read plus write bytes).
Bandwidth measure_bandwidth(int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.f), b(n, 0.f);
  Context ctx(threads);
  Bandwidth bw;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<double> partial(static_cast<size_t>(ctx.threads()) * 8, 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t blocks = ctx.threads() * 8;
    ctx.pool().parallel_for(blocks, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const size_t lo = n * i / blocks, hi = n * (i + 1) / blocks;
        float s[16] = {};
        for (size_t k = lo; k + 16 <= hi; k += 16)
          for (int j = 0; j < 16; ++j) s[j] += a[k + j];
        double t = 0;
        for (float x : s) t += x;
        partial[i] = t;
      }
    });
    const double read_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(partial.data());
    bw.read_gbs = std::max(bw.read_gbs, n * sizeof(float) / read_s / 1e9);
    const auto t1 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    const double copy_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    benchmark::DoNotOptimize(b.data());
    bw.memcpy_gbs = std::max(bw.memcpy_gbs, 2.0 * n * sizeof(float) / copy_s / 1e9);
  }
  return bw;
}

Bandwidth g_bandwidth;

constexpr DType kDecodeDtypes[] = {DType::kF32, DType::kBF16, DType::kQ8};

// Args: batch, dtype index.
void run_decode(benchmark::State& state, const std::string& layer, bool mimo = false) {
  const int64_t B = state.range(0);
  const DType dtype = kDecodeDtypes[state.range(1)];
  LanguageModel model(config_130m(layer, mimo));
  fill_weights(model);
  const double wbytes = weight_bytes_per_token(model, dtype),
               sbytes = state_bytes_per_sequence(model);
  if (dtype != DType::kF32) model.convert_projections(dtype);
  Context ctx(bench_threads());
  ModelState st = model.make_state(B);
  std::vector<int64_t> tok(B);
  std::mt19937 rng(7);
  for (auto& t : tok) t = rng() % 50277;
  // A short prefill, then steps feeding the argmax back (as greedy decoding).
  for (int i = 0; i < 4; ++i) model.step(tok.data(), st, ctx);
  for (auto _ : state) {
    const Tensor& logits = model.step(tok.data(), st, ctx);
    for (int64_t b = 0; b < B; ++b) {
      const float* row = logits.data<float>() + b * model.config().vocab_size;
      tok[b] = std::max_element(row, row + model.config().vocab_size) - row;
    }
  }
  state.SetLabel(std::string(dtype_name(dtype)));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * B), benchmark::Counter::kIsRate);
  state.counters["threads"] = ctx.threads();
  state.counters["weights_MB"] = wbytes / 1e6;
  state.counters["state_MB_per_seq"] = sbytes / 1e6;
  // The step's bytes over the measured streaming-read bandwidth.
  const double step_bytes = wbytes + 2.0 * B * sbytes;
  state.counters["bound_steps/s"] = g_bandwidth.read_gbs * 1e9 / step_bytes;
}

void BM_DecodeMamba2_130m(benchmark::State& s) { run_decode(s, "Mamba2"); }
void BM_DecodeMamba3Siso_130m(benchmark::State& s) { run_decode(s, "Mamba3"); }
void BM_DecodeMamba3Mimo4_130m(benchmark::State& s) { run_decode(s, "Mamba3", true); }

BENCHMARK(BM_DecodeMamba2_130m)
    ->ArgNames({"batch", "dtype"})
    ->ArgsProduct({{1, 8}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(BM_DecodeMamba3Siso_130m)
    ->ArgNames({"batch", "dtype"})
    ->ArgsProduct({{1, 8}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);

BENCHMARK(BM_DecodeMamba3Mimo4_130m)
    ->ArgNames({"batch", "dtype"})
    ->ArgsProduct({{1, 8}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);

void print_bounds() {
  const int threads = bench_threads();
  g_bandwidth = measure_bandwidth(threads);
  std::printf(
      "memory bandwidth (%d threads): streaming read %.1f GB/s, memcpy %.1f GB/s (read + write)\n",
      threads, g_bandwidth.read_gbs, g_bandwidth.memcpy_gbs);
  for (const char* layer : {"Mamba2", "Mamba3"}) {
    LanguageModel model(config_130m(layer));
    const double w = weight_bytes_per_token(model), s = state_bytes_per_sequence(model);
    const double t_w = w / (g_bandwidth.read_gbs * 1e9),
                 t_ws = (w + 2 * s) / (g_bandwidth.read_gbs * 1e9);
    std::printf(
        "%s 130m, batch 1: weights %.1f MB per token -> bound %.2f ms/token (%.1f tokens/s); "
        "with the state read and written (%.1f MB) %.2f ms (%.1f tokens/s)\n",
        layer, w / 1e6, t_w * 1e3, 1 / t_w, 2 * s / 1e6, t_ws * 1e3, 1 / t_ws);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace ssm

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ssm::print_bounds();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
