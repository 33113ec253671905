// Helpers of the Mamba-3 op tests: tensors made on the host in F32 (or F64,
// for the reference's double instances) and moved to a backend's device,
// outputs that start as NaN (so that an element a kernel forgets to write
// fails the comparison), and finite differences in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ssm/ops/backend.h"
#include "ssm/ops/mamba3.h"
#include "support/backends.h"
#include "support/random.h"

namespace ssm::testing::m3 {

// Where and in what dtype a test builds its tensors: F32 on a backend's
// device, or F64 on the host for the reference's double instances.
struct Place {
  Device device = Device::host();
  DType dtype = DType::kF32;
  static Place of(const Context& ctx) { return {ctx.device(), DType::kF32}; }
  static Place f64() { return {Device::host(), DType::kF64}; }
  Tensor put(const Tensor& host_f32) const {
    return host_f32.defined() ? host_f32.to_dtype(dtype).to(device) : Tensor();
  }
  Tensor nan(const Shape& shape) const {
    Tensor t = Tensor::empty(DType::kF32, shape);
    std::fill(t.data<float>(), t.data<float>() + t.numel(),
              std::numeric_limits<float>::quiet_NaN());
    return put(t);
  }
};

// Elements (row, col) of a host F64 tensor with rows.
inline double& at(Tensor& t, int64_t row, int64_t col) {
  return t.data<double>()[row * t.row_stride() + col];
}

// d J / d x by centred differences, x a host F64 tensor with rows (a view:
// perturbing it perturbs what J reads). Dense F64, x's shape.
inline Tensor fd_gradient(Tensor x, const std::function<double()>& J, double h = 1e-6) {
  Tensor g = Tensor::zeros(DType::kF64, x.shape());
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t c = 0; c < x.cols(); ++c) {
      const double keep = at(x, r, c);
      at(x, r, c) = keep + h;
      const double up = J();
      at(x, r, c) = keep - h;
      const double down = J();
      at(x, r, c) = keep;
      g.data<double>()[r * x.cols() + c] = (up - down) / (2 * h);
    }
  return g;
}

// sum(w * t) in double over a tensor with rows; w dense of t's shape.
inline double weighted_sum(const Tensor& t, const Tensor& w) {
  const Tensor a = t.clone().to_dtype(DType::kF64), b = w.to_dtype(DType::kF64);
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

// close() in double precision, for the reference against finite differences.
inline ::testing::AssertionResult close64(const Tensor& got, const Tensor& want, double rel) {
  const Tensor a = host(got).clone().to_dtype(DType::kF64);
  const Tensor b = host(want).clone().to_dtype(DType::kF64);
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shape " << a.shape() << " vs " << b.shape();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(a.data<double>()[i] - b.data<double>()[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    scale = std::max(scale, std::abs(b.data<double>()[i]));
  }
  if (diff <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |got - want| = " << diff << ", max |want| = " << scale << ", relative "
         << diff / scale << " > " << rel;
}

// Every element equal: results the old kernels guaranteed independent of the
// thread count.
inline ::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  const Tensor x = host(a).to_f32(), y = host(b).to_f32();
  if (x.shape() != y.shape()) return ::testing::AssertionFailure() << "shapes differ";
  if (std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0)
    return ::testing::AssertionFailure()
           << "results differ (max rel " << max_rel_error(x, y) << ")";
  return ::testing::AssertionSuccess();
}

// Random host F32 tensor, or undefined when !present.
inline Tensor maybe_random(bool present, const Shape& shape, uint64_t seed, float lo = -1.f,
                           float hi = 1.f) {
  return present ? random_tensor(shape, seed, lo, hi) : Tensor();
}

using Named = std::vector<std::pair<const char*, Tensor>>;

// run(ctx) -> Named on the backend with 1 and 2 threads: each result close to
// ref's `want` (entries undefined there are skipped), and the two identical.
template <typename Run>
void expect_matches(const std::string& backend, const Named& want, Run&& run, Tolerance tol) {
  Named first;
  for (int threads : {1, 2}) {
    Context ctx(backend, threads);
    const Named got = run(ctx);
    for (size_t i = 0; i < got.size(); ++i) {
      if (!want[i].second.defined()) continue;
      EXPECT_TRUE(close(got[i].second, want[i].second, tol))
          << got[i].first << ", " << threads << " threads";
      if (threads == 2) {
        EXPECT_TRUE(identical(got[i].second, first[i].second))
            << got[i].first << ", 1 vs 2 threads";
      }
    }
    first = got;
  }
}

// A gradient against centred differences of J by its input; skipped when
// the gradient is undefined.
struct FdCheck {
  const char* name;
  Tensor grad, input;
};
inline void expect_fd(const std::vector<FdCheck>& checks, const std::function<double()>& J,
                      double rel) {
  for (const FdCheck& c : checks)
    if (c.grad.defined()) {
      EXPECT_TRUE(close64(c.grad, fd_gradient(c.input, J), rel)) << c.name;
    }
}

}  // namespace ssm::testing::m3
