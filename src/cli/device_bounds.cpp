#include "cli/device_bounds.h"

#include <algorithm>
#include <chrono>

#include "cli/bench_bounds.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/tensor/device_peak.h"
#include "ssm/tensor/tensor.h"

namespace ssm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

// F32 operands. On a device the product runs with bf16 compute (one
// tensor-core product, x and W rounded to bf16 on the way): the bf16 rate.
// Not BF16 weights: their path splits x into exact bf16 pieces, three
// products, and would understate the rate threefold. Best of a few timed
// products; reading one value back waits for the device.
double measure_linear_flops(Context& ctx, bool bf16_after) {
  const bool device = ctx.device() != Device::host();
  const int64_t n = device ? kDeviceLinearN : kHostLinearN;
  const DType wt = DType::kF32;
  if (device && ctx.resources()) ctx.resources()->set_bf16_compute(true);
  const Tensor x = Tensor::zeros(DType::kF32, {n, n}, ctx.device());
  const Tensor W = Tensor::zeros(wt, {n, n}, ctx.device());
  const Tensor y = Tensor::zeros(DType::kF32, {n, n}, ctx.device());
  ops::fill(ctx, x, 0.5f);
  auto wait = [&] { return ops::sum_squares(ctx, y.slice(0, 0, 1)); };
  ops::linear(ctx, {.x = x, .W = W, .y = y});
  wait();
  double best = 1e30;
  const int reps = device ? 10 : 2;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) ops::linear(ctx, {.x = x, .W = W, .y = y});
    wait();
    best = std::min(best, seconds_since(t0) / reps);
  }
  if (device && ctx.resources()) ctx.resources()->set_bf16_compute(bf16_after);
  return 2.0 * static_cast<double>(n) * n * n / best;
}

// The device's own copy (cudaMemcpy on a GPU): the fastest a dense move of
// the device's memory goes, which is what a decode step's weight reads are
// held against. The copy runs on the device's default stream, so the
// one-value read back after it (on the same stream) waits for it; ops
// queued earlier on the context's stream are waited for too (the
// context's stream is a blocking one).
double measure_copy_bytes_per_s(Context& ctx, uint64_t bytes) {
  const Device device = ctx.device();
  const DeviceMemory& mem = device_memory(device);
  constexpr int64_t kCols = 4096;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(bytes / (kCols * sizeof(float))));
  Tensor a = Tensor::zeros(DType::kF32, {rows, kCols}, device);
  Tensor b = Tensor::zeros(DType::kF32, {rows, kCols}, device);
  auto wait = [&] { return b.slice(0, 0, 1).to(Device::host()); };
  mem.copy_on_device(device, b.raw(), a.raw(), a.nbytes());  // warm-up
  wait();
  double best = 1e30;
  const int reps = 5;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) mem.copy_on_device(device, b.raw(), a.raw(), a.nbytes());
    wait();
    best = std::min(best, seconds_since(t0) / reps);
  }
  return 2.0 * static_cast<double>(a.nbytes()) / best;
}

void memory_use(Device device, uint64_t* peak, uint64_t* capacity) {
  *peak = 0;
  *capacity = 0;
  if (device == Device::host()) {
    *peak = peak_rss_bytes();
    return;
  }
  const DeviceMemory& m = device_memory(device);
  if (m.usage) m.usage(device, peak, capacity);
}

void reset_memory_peak(Device device) {
  if (device == Device::host()) {
    reset_peak_rss();
    return;
  }
  reset_device_peak(device);
}

}  // namespace ssm::cli
