// One Google Benchmark case per cpu kernel at 130m shapes (d_model 768,
// in_proj 3352 x 768 of Mamba-2, out_proj 768 x 1536), on
// SSM_BENCH_THREADS threads (default 2):
//   linear per weight dtype, M = 1 and 8 (decode GEMV), 32 (batched decode)
//     and 512 (prefill GEMM), with GB/s of weights read and GFLOP/s; the
//     head (50288 x 768) at M = 1 and 8, too large for the caches;
//   rms_norm and the causal conv1d over a 512-token prompt and one decode step;
//   one parallel_for round trip of the thread pool (what every op pays);
//   linear per dtype on one thread over weights twice the L3, against a
//   streaming read of the same bytes (CPU time).
//   the SSD scan over a 512-token prompt, with F32 and with BF16 state
//     products (what a model with BF16 projections runs);
//   the SSD decode step of batch 8 over 24 layers' states (151 MB in F32,
//     more than the caches), the state stored in F32 and in BF16, with the
//     state's bytes read and written per second;
// the scans also run inside prefill_bench and decode_bench, whose
// model-level cases exercise them with their real layouts.
// The bounds, measured in the same run so that a loaded machine shows in
// both: BM_BoundSgemm (OpenBLAS SGEMM on the in_proj shape, split by rows
// over the same threads: the FLOP/s the M = 512 cases compare with) and
// BM_BoundRead (a streaming read of 512 MiB: the weight bytes/s the decode
// cases compare with; the decode matrices themselves fit in L3, so these
// cases can pass it).
//   build/bench/kernels_bench --benchmark_filter='Linear|Bound'

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "random_tensor.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"
#include "ssm/core/thread_pool.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

int bench_threads() {
  const char* env = std::getenv("SSM_BENCH_THREADS");
  return env ? std::max(1, std::atoi(env)) : 2;
}

using bench::random_f32;

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8};

// Args: dtype index, M, N, K.
void BM_Linear(benchmark::State& state) {
  const DType dtype = kDtypes[state.range(0)];
  const int64_t M = state.range(1), N = state.range(2), K = state.range(3);
  const Tensor W = random_f32({N, K}, 1).to_dtype(dtype);
  const Tensor x = random_f32({M, K}, 2, 1.f), y = Tensor::empty(DType::kF32, {M, N});
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    ops::linear(ctx, {.x = x, .W = W, .y = y});
    benchmark::DoNotOptimize(y.raw());
  }
  const double weight_bytes = static_cast<double>(W.nbytes());
  state.counters["weight bytes/s"] =
      benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(M * N * K),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(dtype)));
}
BENCHMARK(BM_Linear)
    ->ArgNames({"dtype", "M", "N", "K"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 8, 512}, {3352}, {768}})
    ->ArgsProduct({{0, 1, 3}, {1, 8}, {768}, {1536}})
    ->ArgsProduct({{0, 1, 3}, {32}, {3352}, {768}})
    // The tied head (vocabulary 50288): larger than L3, read from memory.
    ->ArgsProduct({{0, 1, 3}, {1, 8}, {50288}, {768}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_BoundSgemm(benchmark::State& state) {
  const int64_t M = 512, N = 3352, K = 768;
  const int threads = bench_threads();
  openblas_set_num_threads(1);
  std::vector<float> A(M * K, 0.5f), B(N * K, 0.25f), C(M * N);
  ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallel_for(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t m0 = M * t / threads, m1 = M * (t + 1) / threads;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m1 - m0), N, K,
                    1.f, A.data() + m0 * K, K, B.data(), K, 0.f, C.data() + m0 * N, N);
      }
    });
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BoundSgemm)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_BoundRead(benchmark::State& state) {
  const int64_t n = int64_t{128} << 20;  // floats: 512 MiB
  const int threads = bench_threads();
  std::vector<float> a(n, 1.f);
  ThreadPool pool(threads);
  const int64_t blocks = int64_t{threads} * 8;
  std::vector<float> partial(blocks);
  for (auto _ : state) {
    pool.parallel_for(blocks, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float s[16] = {};
        for (int64_t k = n * i / blocks; k + 16 <= n * (i + 1) / blocks; k += 16)
          for (int j = 0; j < 16; ++j) s[j] += a[k + j];
        float t = 0;
        for (float v : s) t += v;
        partial[i] = t;
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["bytes/s"] =
      benchmark::Counter(4.0 * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BoundRead)->Unit(benchmark::kMillisecond)->UseRealTime();

// One thread, CPU time (so that a loaded machine's time-slicing does not
// count): linear at M = 1 and 8 over 64 MiB of weights per dtype (twice
// the L3 of the Zen 5 machines: every byte from memory), and a plain
// streaming read of 64 MiB, side by side: each kernel's "weight bytes/s"
// over BM_StreamRead1's "bytes/s" is its streaming efficiency
// (docs/CPU.md, "Decode matrix-vector kernels against a streaming read").
//   build/bench/kernels_bench --benchmark_filter='FromMemory|StreamRead1'
constexpr int64_t kFromMemoryBytes = int64_t{64} << 20;

// Args: dtype index, M.
void BM_LinearFromMemory(benchmark::State& state) {
  const DType dtype = kDtypes[state.range(0)];
  const int64_t M = state.range(1), K = 768;
  const int64_t N = kFromMemoryBytes / (K * static_cast<int64_t>(dtype_size(dtype)));
  const Tensor W = random_f32({N, K}, 11).to_dtype(dtype);
  const Tensor x = random_f32({M, K}, 12, 1.f), y = Tensor::empty(DType::kF32, {M, N});
  Context ctx("cpu", 1);
  for (auto _ : state) {
    ops::linear(ctx, {.x = x, .W = W, .y = y});
    benchmark::DoNotOptimize(y.raw());
  }
  state.counters["weight bytes/s"] = benchmark::Counter(
      static_cast<double>(W.nbytes()), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(dtype)));
}
BENCHMARK(BM_LinearFromMemory)
    ->ArgNames({"dtype", "M"})
    ->ArgsProduct({{0, 1, 3}, {1, 8}})
    ->Unit(benchmark::kMillisecond);

// A sum of n floats, bound by the loads: with AVX-512 (where the CPU has
// it) four independent 64-byte loads a step, the width the kernels read at;
// otherwise 16 sums the compiler vectorises for the baseline.
#if defined(__x86_64__)
SSM_TARGET_AVX512 float stream_sum_avx512(const float* a, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = 0; k + 64 <= n; k += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(a + k));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(a + k + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(a + k + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(a + k + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}
#endif

float stream_sum(const float* a, int64_t n) {
#if defined(__x86_64__)
  if (cpu::cpu_has_avx512()) return stream_sum_avx512(a, n);
#endif
  float s[16] = {};
  for (int64_t k = 0; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; ++j) s[j] += a[k + j];
  float t = 0;
  for (float v : s) t += v;
  return t;
}

void BM_StreamRead1(benchmark::State& state) {
  const int64_t n = kFromMemoryBytes / 4;
  std::vector<float> a(static_cast<size_t>(n), 1.f);
  for (auto _ : state) benchmark::DoNotOptimize(stream_sum(a.data(), n));
  state.counters["bytes/s"] = benchmark::Counter(4.0 * static_cast<double>(n),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead1)->Unit(benchmark::kMillisecond);

// Args: rows.
void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), D = 768;
  const Tensor x = random_f32({rows, D}, 3, 1.f), w = random_f32({D}, 4, 1.f);
  const Tensor out = Tensor::empty(DType::kF32, {rows, D});
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    ops::rms_norm(ctx, {.x = x, .w = w, .out = out});
    benchmark::DoNotOptimize(out.raw());
  }
  state.counters["bytes/s"] =
      benchmark::Counter(2.0 * 4 * rows * D, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Args: L (1: the decode step with its state). Channels: Mamba-2 130m conv_dim.
void BM_Conv1d(benchmark::State& state) {
  const int64_t L = state.range(0), C = 1792, Kc = 4;
  const Tensor in = random_f32({1, L, C}, 5, 1.f), w = random_f32({C, 1, Kc}, 6, 0.5f);
  const Tensor bias = random_f32({C}, 7), out = Tensor::empty(DType::kF32, {1, L, C});
  const Tensor conv_state = Tensor::zeros(DType::kF32, {1, Kc - 1, C});
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    ops::conv1d(ctx, {.in = in, .weight = w, .bias = bias, .state = conv_state, .out = out});
    benchmark::DoNotOptimize(out.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv1d)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Args: BF16 state products (0 or 1). Mamba-2 130m: 24 heads of 64, one
// group, a state of 128, chunk 256 (the cpu runs 64), 512 steps.
void BM_SsdScan(benchmark::State& state) {
  const int64_t L = 512, H = 24, P = 64, N = 128;
  const Tensor x = random_f32({1, L, H * P}, 8, 1.f), B = random_f32({1, L, N}, 9, 1.f);
  const Tensor C = random_f32({1, L, N}, 10, 1.f), D = random_f32({H}, 11, 1.f);
  Tensor dt = random_f32({1, L, H}, 12, 0.25f), A = random_f32({H}, 13, 1.f);
  for (int64_t i = 0; i < dt.numel(); ++i) dt.data<float>()[i] += 0.26f;  // in (0.01, 0.51)
  for (int64_t h = 0; h < H; ++h) A.data<float>()[h] -= 1.05f;            // in (-2.05, -0.05)
  const Tensor y = Tensor::empty(DType::kF32, {1, L, H * P});
  const Tensor st = Tensor::zeros(DType::kF32, {1, H, P, N});
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    ops::ssd_scan(ctx, {.chunk = 256, .x = x, .B = B, .C = C, .dt = dt, .A = A, .D = D, .y = y,
                        .state = st, .bf16_state_products = state.range(0) != 0});
    benchmark::DoNotOptimize(y.raw());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SsdScan)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Arg: the state's dtype (0 F32, 1 BF16).
void BM_SsdStepState(benchmark::State& state) {
  const int64_t Bn = 8, H = 24, P = 64, N = 128, layers = 24;
  const DType dtype = state.range(0) ? DType::kBF16 : DType::kF32;
  const Tensor x = random_f32({Bn, 1, H * P}, 8, 1.f), B = random_f32({Bn, 1, N}, 9, 1.f);
  const Tensor C = random_f32({Bn, 1, N}, 10, 1.f), D = random_f32({H}, 11, 1.f);
  Tensor dt = random_f32({Bn, 1, H}, 12, 0.25f), A = random_f32({H}, 13, 1.f);
  for (int64_t i = 0; i < dt.numel(); ++i) dt.data<float>()[i] += 0.26f;
  for (int64_t h = 0; h < H; ++h) A.data<float>()[h] -= 1.05f;
  const Tensor y = Tensor::empty(DType::kF32, {Bn, 1, H * P});
  std::vector<Tensor> states;
  for (int64_t l = 0; l < layers; ++l)
    states.push_back(random_f32({Bn, H, P, N}, 20 + static_cast<uint64_t>(l), 1.f).to_dtype(dtype));
  Context ctx("cpu", bench_threads());
  for (auto _ : state) {
    for (const Tensor& st : states)
      ops::ssd_scan(ctx, {.x = x, .B = B, .C = C, .dt = dt, .A = A, .D = D, .y = y, .state = st});
    benchmark::DoNotOptimize(y.raw());
  }
  state.counters["state bytes/s"] = benchmark::Counter(
      2.0 * static_cast<double>(layers) * static_cast<double>(states[0].nbytes()),
      benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(dtype)));
}
BENCHMARK(BM_SsdStepState)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// One parallel_for over the pool with (almost) nothing to do, back to back:
// what a decode step pays per op to share it between threads.
void BM_PoolRoundTrip(benchmark::State& state) {
  ThreadPool pool(bench_threads());
  std::vector<int64_t> sink(64 * static_cast<size_t>(pool.size()));
  for (auto _ : state) {
    pool.parallel_for(pool.size(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink[static_cast<size_t>(i) * 64] += i;
    });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_PoolRoundTrip)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace ssm

BENCHMARK_MAIN();
