// The matrix products of a training step one op at a time, at the 130m
// Mamba-2 shapes of train_bench (4 x 512 = 2048 rows, d_model 768, in_proj
// 3352 x 768, out_proj 768 x 1536, the tied head 50280 x 768), on
// SSM_BENCH_THREADS threads (default 1, so that the CPU time per
// multiply-add is the kernel's own, not the pool's waits):
//   linear forward, linear_backward's dx and dW alone, and the head's fused
//   loss with df and dhead;
//   conv1d's backward on the Mamba-2 layer's views (1792 channels of the
//   in_proj output's 3352 columns);
//   the SSD scan's backward at the layer's shapes (24 heads of 64, one
//   group, states of 128, chunks of 256): most of its time is the small
//   products of x86_small_gemm.cpp.
// The figure to compare on a shared machine is GFMA per CPU second (the CPU
// time of all the process's threads), against the core's peak
// (2 x 16 F32 multiply-adds a cycle on Zen 5).
//   build/bench/train_ops_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <random>

#include "random_tensor.h"
#include "ssm/ops/context.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/cross_entropy.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

int bench_threads() {
  const char* env = std::getenv("SSM_BENCH_THREADS");
  return env ? std::max(1, std::atoi(env)) : 1;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

using bench::random_f32;

// Runs op per iteration; reports multiply-adds per CPU second.
template <typename Op>
void run_fma(benchmark::State& state, double fma, Op&& op) {
  op();  // sizes the arena (its blocks merge into one when the call ends)
  op();  // touches the merged block
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) op();
  const double cpu = process_cpu_seconds() - cpu0;
  state.counters["GFMA/cpu_s"] = fma * static_cast<double>(state.iterations()) / cpu / 1e9;
  state.counters["cpu_ms/op"] = 1e3 * cpu / static_cast<double>(state.iterations());
}

// Args: mode (0 forward, 1 dx, 2 dW), N, K; M = 2048.
void BM_Linear130m(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t M = 2048, N = state.range(1), K = state.range(2);
  const Tensor W = random_f32({N, K}, 1, 0.02f), x = random_f32({M, K}, 2, 1.f);
  const Tensor dy = random_f32({M, N}, 3, 1.f), y = Tensor::empty(DType::kF32, {M, N});
  const Tensor dx = Tensor::empty(DType::kF32, {M, K}), dW = Tensor::zeros(DType::kF32, {N, K});
  Context ctx("cpu", bench_threads());
  run_fma(state, static_cast<double>(M * N * K), [&] {
    if (mode == 0)
      ops::linear(ctx, {.x = x, .W = W, .y = y});
    else if (mode == 1)
      ops::linear_backward(ctx, {.x = x, .W = W, .dy = dy, .dx = dx});
    else
      ops::linear_backward(ctx, {.x = x, .W = W, .dy = dy, .dW = dW});
  });
  state.SetLabel(mode == 0 ? "forward" : mode == 1 ? "dx" : "dW");
}
BENCHMARK(BM_Linear130m)
    ->ArgNames({"mode", "N", "K"})
    ->ArgsProduct({{0, 1, 2}, {3352}, {768}})
    ->ArgsProduct({{0, 1, 2}, {768}, {1536}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The tied head's loss, df and dhead over 2048 rows: three products of
// 2048 x 50280 x 768.
void BM_HeadLoss130m(benchmark::State& state) {
  const int64_t R = 2048, V = 50280, D = 768;
  const Tensor f = random_f32({R, D}, 4, 1.f), head = random_f32({V, D}, 5, 0.02f);
  Tensor targets = Tensor::empty(DType::kI64, {R});
  for (int64_t r = 0; r < R; ++r) targets.data<int64_t>()[r] = (r * 7919) % V;
  const Tensor df = Tensor::empty(DType::kF32, {R, D}), dhead = Tensor::zeros(DType::kF32, {V, D});
  Context ctx("cpu", bench_threads());
  run_fma(state, 3.0 * static_cast<double>(R * V * D), [&] {
    benchmark::DoNotOptimize(
        ops::head_cross_entropy(ctx, {.vocab = V,
                                      .f = f,
                                      .head = head,
                                      .targets = targets,
                                      .grad_scale = 1.0 / static_cast<double>(R),
                                      .df = df,
                                      .dhead = dhead}));
  });
}
BENCHMARK(BM_HeadLoss130m)->Iterations(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// conv1d's backward as the Mamba-2 layer runs it: the input and its gradient
// columns of zxbcdt (row stride 3352), the output gradient dense.
void BM_Conv1dBackward130m(benchmark::State& state) {
  const int64_t B = 4, L = 512, C = 1792, Kc = 4, ld = 3352, c0 = 1536;
  const Tensor zxbcdt = random_f32({B, L, ld}, 6, 1.f), dzxbcdt = random_f32({B, L, ld}, 7, 1.f);
  const Tensor w = random_f32({C, 1, Kc}, 8, 0.5f), bias = random_f32({C}, 9, 0.1f);
  const Tensor dout = random_f32({B, L, C}, 10, 1.f);
  const Tensor dw = Tensor::zeros(DType::kF32, {C, 1, Kc}), db = Tensor::zeros(DType::kF32, {C});
  Context ctx("cpu", bench_threads());
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state)
    ops::conv1d_backward(ctx, {.in = zxbcdt.cols(c0, c0 + C),
                               .weight = w,
                               .bias = bias,
                               .silu = true,
                               .dout = dout,
                               .din = dzxbcdt.cols(c0, c0 + C),
                               .dweight = dw,
                               .dbias = db});
  state.counters["cpu_ms/op"] =
      1e3 * (process_cpu_seconds() - cpu0) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Conv1dBackward130m)->Unit(benchmark::kMillisecond)->UseRealTime();

// The SSD scan's backward as the Mamba-2 layer runs it (dense operands; dt
// after ssd_prepare, positive; A negative), CPU ms per call.
void BM_SsdScanBackward130m(benchmark::State& state) {
  const int64_t Bn = 4, L = 512, H = 24, P = 64, N = 128;
  const Tensor x = random_f32({Bn, L, H * P}, 11, 1.f), B = random_f32({Bn, L, N}, 12, 0.3f);
  const Tensor C = random_f32({Bn, L, N}, 13, 0.3f), dy = random_f32({Bn, L, H * P}, 14, 1.f);
  Tensor dt = random_f32({Bn, L, H}, 15, 1.f), A = random_f32({H}, 16, 1.f);
  for (int64_t i = 0; i < dt.numel(); ++i)
    dt.data<float>()[i] = 0.01f + 0.05f * std::abs(dt.data<float>()[i]);
  for (int64_t h = 0; h < H; ++h) A.data<float>()[h] = -1.f - std::abs(A.data<float>()[h]);
  const Tensor D = random_f32({H}, 17, 1.f);
  const Tensor dx = Tensor::empty(DType::kF32, {Bn, L, H * P});
  const Tensor dB = Tensor::empty(DType::kF32, {Bn, L, N}),
               dC = Tensor::empty(DType::kF32, {Bn, L, N});
  const Tensor ddt = Tensor::empty(DType::kF32, {Bn, L, H});
  const Tensor dA = Tensor::zeros(DType::kF32, {H}), dD = Tensor::zeros(DType::kF32, {H});
  Context ctx("cpu", bench_threads());
  const ops::SsdScanArgs fwd{.x = x, .B = B, .C = C, .dt = dt, .A = A, .D = D};
  auto op = [&] {
    ops::ssd_scan_backward(
        ctx, {.fwd = fwd, .dy = dy, .dx = dx, .dB = dB, .dC = dC, .ddt = ddt, .dA = dA, .dD = dD});
  };
  op();  // sizes the arena
  op();  // touches its merged block
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) op();
  state.counters["cpu_ms/op"] =
      1e3 * (process_cpu_seconds() - cpu0) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SsdScanBackward130m)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ssm

BENCHMARK_MAIN();
