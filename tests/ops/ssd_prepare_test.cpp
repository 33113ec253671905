// ssd_prepare and its backward on every backend against ref, with the clamp
// of dt active and not; ref against the formulas of SPEC §3, and its backward
// against finite differences in double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ops/ref/ssd.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::in_wider_rows;
using testing::on;
using testing::random_tensor;

struct PrepareCase {
  int64_t B, L, H;
  float dt_min, dt_max;
};
constexpr float kInf = std::numeric_limits<float>::infinity();
// dt_raw + dt_bias spans about [-4, 2], softplus about [0.018, 2.1]: the
// narrow limits clamp many entries on both sides.
const PrepareCase kCases[] = {{2, 5, 4, 0.f, kInf},
                              {1, 1, 24, 0.05f, 0.5f},
                              {3, 70, 8, 0.05f, 0.5f},
                              {2, 33, 3, 0.001f, kInf}};

class SsdPrepareTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SsdPrepareTest, MatchesRef) {
  for (const PrepareCase& s : kCases) {
    SCOPED_TRACE(::testing::Message() << "B " << s.B << " L " << s.L << " H " << s.H);
    const Tensor dt_raw = random_tensor({s.B, s.L, s.H}, s.L, -3.f, 1.f);
    const Tensor bias = random_tensor({s.H}, s.L + 1),
                 A_log = random_tensor({s.H}, s.L + 2, -1.f, 2.f);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      // dt_raw: the last columns of in_proj's rows; dt in rows of its own.
      const auto dt = in_block(ctx, Tensor::zeros(DType::kF32, {s.B, s.L, s.H}), 1, 0);
      const Tensor A = on(ctx, Tensor::zeros(DType::kF32, {s.H}));
      ops::ssd_prepare(ctx, {.dt_raw = in_wider_rows(ctx, dt_raw, 9, 0),
                             .dt_bias = on(ctx, bias),
                             .A_log = on(ctx, A_log),
                             .dt_min = s.dt_min,
                             .dt_max = s.dt_max,
                             .dt = dt.view,
                             .A = A});
      return testing::outputs({{"dt", dt.rows}, {"A", A}});
    });
  }
}

TEST_P(SsdPrepareTest, BackwardMatchesRef) {
  for (const PrepareCase& s : kCases)
    for (bool params : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " L " << s.L << " H " << s.H << " params " << params);
      const uint64_t seed = s.L * 3 + params;
      const Tensor dt_raw = random_tensor({s.B, s.L, s.H}, seed, -3.f, 1.f);
      const Tensor bias = random_tensor({s.H}, seed + 1), A_log = random_tensor({s.H}, seed + 2);
      const Tensor ddt = random_tensor({s.B, s.L, s.H}, seed + 3),
                   dA = random_tensor({s.H}, seed + 4);
      const Tensor dbias0 = random_tensor({s.H}, seed + 5),
                   dA_log0 = random_tensor({s.H}, seed + 6);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const auto ddt_raw = in_block(ctx, Tensor::zeros(DType::kF32, {s.B, s.L, s.H}), 7, 0);
        const Tensor dbias = params ? on(ctx, dbias0) : Tensor();
        const Tensor dA_log = params ? on(ctx, dA_log0) : Tensor();
        ops::ssd_prepare_backward(ctx, {.dt_raw = in_wider_rows(ctx, dt_raw, 9, 0),
                                        .dt_bias = on(ctx, bias),
                                        .A_log = on(ctx, A_log),
                                        .dt_min = s.dt_min,
                                        .dt_max = s.dt_max,
                                        .ddt = on(ctx, ddt),
                                        .dA = on(ctx, dA),
                                        .ddt_raw = ddt_raw.view,
                                        .ddt_bias = dbias,
                                        .dA_log = dA_log});
        return testing::outputs(
            {{"ddt_raw", ddt_raw.rows}, {"ddt_bias", dbias}, {"dA_log", dA_log}});
      });
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, SsdPrepareTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

TEST(SsdPrepareRef, EqualsTheFormulas) {
  const int64_t R = 50, H = 6;
  const float lo = 0.05f, hi = 0.5f;
  const Tensor raw = random_tensor({R, H}, 1, -3.f, 1.f), bias = random_tensor({H}, 2);
  const Tensor A_log = random_tensor({H}, 3);
  Context ctx("ref", 1);
  Tensor dt = Tensor::zeros(DType::kF32, {R, H}), A = Tensor::zeros(DType::kF32, {H});
  ops::ssd_prepare(ctx, {.dt_raw = raw,
                         .dt_bias = bias,
                         .A_log = A_log,
                         .dt_min = lo,
                         .dt_max = hi,
                         .dt = dt,
                         .A = A});
  int clamped = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const double v = static_cast<double>(raw.data<float>()[r * H + h]) + bias.data<float>()[h];
      const double sp = std::log(1 + std::exp(v));
      clamped += sp < lo || sp > hi;
      EXPECT_NEAR(dt.data<float>()[r * H + h], std::min<double>(std::max<double>(sp, lo), hi),
                  1e-7);
    }
  EXPECT_GT(clamped, 0);
  EXPECT_LT(clamped, R * H);
  for (int64_t h = 0; h < H; ++h)
    EXPECT_NEAR(A.data<float>()[h], -std::exp(static_cast<double>(A_log.data<float>()[h])),
                1e-6 * std::exp(static_cast<double>(A_log.data<float>()[h])));
}

TEST(SsdPrepareRef, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, L = 9, H = 5;
  Tensor raw = testing::random_f64({B, L, H}, 1, -3.f, 1.f), bias = testing::random_f64({H}, 2);
  Tensor A_log = testing::random_f64({H}, 3);
  const Tensor g_dt = testing::random_f64({B, L, H}, 4), g_A = testing::random_f64({H}, 5);
  Context ctx("ref", 1);
  auto J = [&] {
    const Tensor dt = testing::zeros_f64({B, L, H}), A = testing::zeros_f64({H});
    ref::ssd_prepare<double>(ctx, {.dt_raw = raw,
                                   .dt_bias = bias,
                                   .A_log = A_log,
                                   .dt_min = 0.05f,
                                   .dt_max = 0.5f,
                                   .dt = dt,
                                   .A = A});
    return testing::weighted_sum(dt, g_dt) + testing::weighted_sum(A, g_A);
  };
  const Tensor g_raw = testing::fd_gradient(raw, J), g_bias = testing::fd_gradient(bias, J);
  const Tensor g_A_log = testing::fd_gradient(A_log, J);
  const Tensor d_raw = testing::zeros_f64({B, L, H}), d_bias = testing::zeros_f64({H});
  const Tensor d_A_log = testing::zeros_f64({H});
  ref::ssd_prepare_backward<double>(ctx, {.dt_raw = raw,
                                          .dt_bias = bias,
                                          .A_log = A_log,
                                          .dt_min = 0.05f,
                                          .dt_max = 0.5f,
                                          .ddt = g_dt,
                                          .dA = g_A,
                                          .ddt_raw = d_raw,
                                          .ddt_bias = d_bias,
                                          .dA_log = d_A_log});
  EXPECT_LE(testing::rel_error_f64(d_raw, g_raw), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(d_bias, g_bias), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(d_A_log, g_A_log), testing::kFdTolerance);
}

}  // namespace
}  // namespace ssm
