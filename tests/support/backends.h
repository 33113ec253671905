// Tests parameterised over backends: every op and model test runs on each
// built-in backend and compares with `ref`, the oracle. A test names a
// backend by string; tensors are made on the host and moved to the backend's
// device with on(), and back with host().
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ssm/ops/backend.h"
#include "ssm/ops/context.h"
#include "support/compare.h"

namespace ssm::testing {

// Test programs are built twice when the build has the cuda backend: the
// usual ones (SSM_GPU_TESTS 0) run on the host backends only, and their
// copies labelled `gpu` (SSM_GPU_TESTS 1, tests/CMakeLists.txt) on cuda
// only, each compared with ref; CI and `ctest -LE gpu` never touch a GPU.
#ifndef SSM_GPU_TESTS
#define SSM_GPU_TESTS 0
#endif
inline constexpr bool kGpuTests = SSM_GPU_TESTS;

inline bool is_gpu_backend(const std::string& name) { return name == "cuda"; }

inline std::vector<std::string> all_backends() {
  std::vector<std::string> out;
  for (const std::string& b : backend_names())
    if (is_gpu_backend(b) == kGpuTests) out.push_back(b);
  return out;
}

// The (backend, threads) pairs a model test runs on: every backend with one
// thread, and cpu with two as well (its results must not depend on it).
inline std::vector<std::pair<std::string, int>> backend_runs() {
  std::vector<std::pair<std::string, int>> runs;
  for (const std::string& b : all_backends()) runs.emplace_back(b, 1);
  if (!kGpuTests) runs.emplace_back("cpu", 2);
  return runs;
}

// gtest's name for a backend parameter ("ref", "cpu").
inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

inline Tensor on(Context& ctx, const Tensor& t) { return t.defined() ? t.to(ctx.device()) : t; }
inline Tensor host(const Tensor& t) { return t.defined() ? t.to(Device::host()) : t; }

// Tolerances of a backend's result against ref's, by the measure of
// compare.h (max |got - want| / max |want|) plus an absolute floor for
// results that are near zero everywhere.
struct Tolerance {
  double rel = 1e-5;
  double abs = 1e-6;
};
inline Tolerance tolerance_for(DType weights) {
  switch (weights) {
    case DType::kF32: return {1e-5, 1e-6};
    case DType::kF16: return {2e-3, 1e-4};
    case DType::kBF16: return {1e-2, 1e-3};
    case DType::kQ8: return {2e-2, 1e-3};
    default: return {1e-5, 1e-6};
  }
}

inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, Tolerance tol = {}) {
  const Tensor a = host(got).to_f32(), b = host(want).to_f32();
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shape " << a.shape() << " vs " << b.shape();
  double diff = 0, scale = 0;
  int64_t worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]);
    if (!(d <= diff)) {  // NaN counts as worst
      diff = d;
      worst = i;
    }
    scale = std::max(scale, std::abs(static_cast<double>(b.data<float>()[i])));
  }
  if (diff <= tol.abs || diff <= tol.rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |got - want| = " << diff << " at element " << worst << " (got "
         << a.data<float>()[worst] << ", want " << b.data<float>()[worst]
         << "), max |want| = " << scale << ", relative " << (scale > 0 ? diff / scale : diff)
         << " > " << tol.rel;
}

}  // namespace ssm::testing
