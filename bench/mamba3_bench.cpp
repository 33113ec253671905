// Mamba-3's prefill ops over a 512-token prompt, one layer of the 130m
// shapes (24 heads of 64 channels, state 128, 32 rotary angles, chunks of
// 64 rows): mamba3_prepare, the chunked mamba3_scan (also over chunks of
// 16 to 128 rows) and the two as mamba3_prepare_scan, SISO (R = 1) and MIMO
// R = 4, on SSM_BENCH_THREADS threads (default 2). With one thread, CPU
// time is what a loaded machine disturbs least:
//   SSM_BENCH_THREADS=1 build/bench/mamba3_bench

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "random_tensor.h"
#include "ssm/ops/mamba3.h"

namespace ssm {
namespace {

int bench_threads() {
  const char* env = std::getenv("SSM_BENCH_THREADS");
  return env ? std::max(1, std::atoi(env)) : 2;
}

using bench::random_f32;

// One Mamba-3 layer's prepare and scan inputs and outputs, 130m shapes:
// H = 24, P = 64, N = 128, 32 angles, G = 1, chunk 64 rows; R = 1 (SISO,
// adjacent pairs) or 4 (MIMO, halves).
struct Mamba3Bench {
  ops::Mamba3PrepareArgs prep;
  ops::Mamba3ScanArgs scan;
  explicit Mamba3Bench(int64_t L, int64_t R) {
    const int64_t H = 24, P = 64, N = 128, S = 32;
    const auto zeros = [](const Shape& s) { return Tensor::zeros(DType::kF32, s); };
    const auto empty = [](const Shape& s) { return Tensor::empty(DType::kF32, s); };
    prep = {.heads = H,
            .groups = 1,
            .rank = R,
            .pairs = R > 1 ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
            .x = random_f32({1, L, H * P}, 11, 1.f),
            .B = random_f32({1, L, R * N}, 12, 1.f),
            .C = random_f32({1, L, R * N}, 13, 1.f),
            .ddt = random_f32({1, L, H}, 14, 1.f),
            .ddA = random_f32({1, L, H}, 15, 1.f),
            .trap = random_f32({1, L, H}, 16, 1.f),
            .ang = random_f32({1, L, S}, 17, 1.f),
            .dt_bias = random_f32({H}, 18, 1.f),
            .B_norm = random_f32({N}, 19, 1.f),
            .C_norm = random_f32({N}, 20, 1.f),
            .B_bias = random_f32({H, R, N}, 21, 1.f),
            .C_bias = random_f32({H, R, N}, 22, 1.f),
            .mimo_x = R > 1 ? random_f32({H, R, P}, 23, 1.f) : Tensor(),
            .phase = zeros({1, H, S}),
            .B_normed = empty({1, L, R * N}),
            .C_normed = empty({1, L, R * N}),
            .ang_rate = empty({1, L, S}),
            .dt = empty({1, H, L}),
            .A = empty({1, H, L}),
            .lam = empty({1, H, L}),
            .q = empty({1, H, L, R, N}),
            .k = empty({1, H, L, R, N}),
            .v = empty({1, H, L, R, P})};
    scan = {.chunk = 64,
            .q = prep.q,
            .k = prep.k,
            .v = prep.v,
            .dt = prep.dt,
            .A = prep.A,
            .lam = prep.lam,
            .D = random_f32({H}, 24, 1.f),
            .o = empty({1, H, L, R, P})};
  }
};

// Args: R. The phase is reset every iteration: the same work each time.
void BM_Mamba3Prepare(benchmark::State& state) {
  Mamba3Bench m(512, state.range(0));
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    std::fill_n(static_cast<float*>(m.prep.phase.raw()), m.prep.phase.numel(), 0.f);
    ops::mamba3_prepare(ctx, m.prep);
    benchmark::DoNotOptimize(m.prep.q.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(512, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba3Prepare)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: R, BF16 products (a model whose projections run in BF16). A fresh
// sequence (no state) each iteration.
void BM_Mamba3Scan(benchmark::State& state) {
  Mamba3Bench m(512, state.range(0));
  m.scan.bf16_state_products = state.range(1) != 0;
  Context ctx("cpu", bench_threads());
  ops::mamba3_prepare(ctx, m.prep);
  for (auto _ : state) {
    ops::mamba3_scan(ctx, m.scan);
    benchmark::DoNotOptimize(m.scan.o.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(512, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba3Scan)
    ->ArgsProduct({{1, 4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: R, chunk rows: the scan's time against its chunk length.
void BM_Mamba3ScanChunk(benchmark::State& state) {
  Mamba3Bench m(512, state.range(0));
  m.scan.chunk = state.range(1);
  Context ctx("cpu", bench_threads());
  ops::mamba3_prepare(ctx, m.prep);
  for (auto _ : state) {
    ops::mamba3_scan(ctx, m.scan);
    benchmark::DoNotOptimize(m.scan.o.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(512, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba3ScanChunk)
    ->ArgsProduct({{1, 4}, {16, 32, 64, 128}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: R. Both ops as inference runs them (mamba3_prepare_scan: on the cpu
// fused per head and chunk), against BM_Mamba3Prepare + BM_Mamba3Scan.
void BM_Mamba3PrepareScan(benchmark::State& state) {
  Mamba3Bench m(512, state.range(0));
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    std::fill_n(static_cast<float*>(m.prep.phase.raw()), m.prep.phase.numel(), 0.f);
    ops::mamba3_prepare_scan(ctx, {.prepare = m.prep, .scan = m.scan});
    benchmark::DoNotOptimize(m.scan.o.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(512, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba3PrepareScan)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: R. One decode step (L = 1) of all 24 layers of the 130m shapes,
// prepare and scan as inference runs them, each layer with its own state
// (24 x 32 KB x 24 heads, 19 MB: from memory, as in decoding). The step
// kernels read and write the state once; "state GB/s" is those bytes (read
// once) over the time, to hold against a streaming read.
void BM_Mamba3DecodeStep(benchmark::State& state) {
  const int64_t R = state.range(0), layers = 24;
  std::vector<Mamba3Bench> m;
  m.reserve(layers);
  for (int64_t l = 0; l < layers; ++l) {
    m.emplace_back(1, R);
    m.back().scan.ssm = Tensor::zeros(DType::kF32, {1, 24, 64, 128});
    m.back().scan.k_prev = Tensor::zeros(DType::kF32, {1, 24, R, 128});
    m.back().scan.v_prev = Tensor::zeros(DType::kF32, {1, 24, R, 64});
  }
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    for (auto& l : m) ops::mamba3_prepare_scan(ctx, {.prepare = l.prep, .scan = l.scan});
    benchmark::DoNotOptimize(m.back().scan.o.raw());
  }
  const double bytes = static_cast<double>(layers) * m[0].scan.ssm.numel() * sizeof(float);
  state.counters["state GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba3DecodeStep)->Arg(1)->Arg(4)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ssm

BENCHMARK_MAIN();
