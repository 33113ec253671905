// rms_norm, gated_rms_norm and their backwards on every backend against ref:
// widths, groups, the plain gate, in-place outputs, strided rows (the gate z
// is a column block of in_proj's output), accumulation; grouped norms equal
// plain norms of the gated input; ref's backwards against finite differences
// in double.
#include "ops/ref/rms_norm.h"

#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {
namespace {

using testing::host;
using testing::in_block;
using testing::in_wider_rows;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

struct Rows {
  int64_t R, D;
};

// out = norm(y * silu(z)) * w, norm(y) * w * silu(z), or y * silu(z).
enum class Gate { kNormAfterGate, kNormBeforeGate, kNoNorm };
constexpr Gate kGates[] = {Gate::kNormAfterGate, Gate::kNormBeforeGate, Gate::kNoNorm};

class RmsNormTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RmsNormTest, MatchesRef) {
  for (const Rows s : {Rows{1, 8}, {5, 64}, {70, 12}, {33, 257}})
    for (int layout = 0; layout < 3; ++layout) {  // dense, in place in wider rows, strided
      SCOPED_TRACE(::testing::Message() << "R " << s.R << " D " << s.D << " layout " << layout);
      const Tensor x = random_tensor({s.R, s.D}, s.R + s.D),
                   w = random_tensor({s.D}, 7, 0.5f, 1.5f);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const auto xd = in_block(ctx, x, layout != 0, 3, 1);
        const auto out =
            layout == 1 ? xd
                        : in_block(ctx, Tensor::zeros(DType::kF32, {s.R, s.D}), layout == 2, 0, 2);
        ops::rms_norm(ctx, {.x = xd.view, .w = on(ctx, w), .out = out.view});
        return testing::outputs({{"out", out.rows}});
      });
    }
}

TEST_P(RmsNormTest, BackwardMatchesRef) {
  for (const Rows s : {Rows{1, 5}, {70, 12}, {100, 33}})
    for (int variant = 0; variant < 4; ++variant) {  // bits: accumulate dx, dw wanted
      const bool accumulate = variant & 1, want_dw = variant & 2, strided = s.R % 2 == 0;
      SCOPED_TRACE(::testing::Message() << "R " << s.R << " D " << s.D << " variant " << variant);
      const uint64_t seed = s.R * 10 + variant;
      const Tensor x = random_tensor({s.R, s.D}, seed),
                   w = random_tensor({s.D}, seed + 1, 0.5f, 1.5f);
      const Tensor dout = random_tensor({s.R, s.D}, seed + 2),
                   dx0 = random_tensor({s.R, s.D}, seed + 3);
      const Tensor dw0 = random_tensor({s.D}, seed + 4);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const auto dx = in_block(ctx, dx0, strided, 2, 2);
        const Tensor dw = want_dw ? on(ctx, dw0) : Tensor();
        ops::rms_norm_backward(ctx, {.x = on_rows(ctx, x, strided, 1, 0),
                                     .w = on(ctx, w),
                                     .dout = on_rows(ctx, dout, strided, 0, 3),
                                     .dx = dx.view,
                                     .accumulate_dx = accumulate,
                                     .dw = dw});
        return testing::outputs({{"dx", dx.rows}, {"dw", dw}});
      });
    }
}

TEST_P(RmsNormTest, GatedMatchesRef) {
  for (const Rows s : {Rows{1, 16}, {9, 48}, {40, 12}})
    for (Gate gate : kGates)
      for (int64_t group : {int64_t{0}, s.D / 4, s.D})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "R " << s.R << " D " << s.D << " gate " << static_cast<int>(gate)
                       << " group " << group << " in place " << in_place);
          const uint64_t seed = s.R * 10 + group;
          const Tensor y = random_tensor({s.R, s.D}, seed),
                       z = random_tensor({s.R, s.D}, seed + 1, -3.f, 3.f);
          const Tensor w = random_tensor({s.D}, seed + 2, 0.5f, 1.5f);
          testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
            const auto yd = in_block(ctx, y, 0, 3);
            const auto out =
                in_place ? yd : in_block(ctx, Tensor::zeros(DType::kF32, {s.R, s.D}), false, 0, 0);
            ops::gated_rms_norm(ctx, {.y = yd.view,
                                      .z = in_wider_rows(ctx, z, 5, 7),
                                      .w = gate == Gate::kNoNorm ? Tensor() : on(ctx, w),
                                      .group = group,
                                      .norm_before_gate = gate == Gate::kNormBeforeGate,
                                      .out = out.view});
            return testing::outputs({{"out", out.rows}});
          });
        }
}

TEST_P(RmsNormTest, GatedBackwardMatchesRef) {
  for (const Rows s : {Rows{1, 16}, {40, 12}, {70, 24}})
    for (Gate gate : kGates)
      for (int64_t group : {int64_t{0}, int64_t{4}, s.D / 2})  // 4: the old engine's
        for (bool want_dw : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "R " << s.R << " D " << s.D << " gate " << static_cast<int>(gate)
                       << " group " << group << " dw " << want_dw);
          const uint64_t seed = s.R * 10 + group + want_dw;
          const Tensor y = random_tensor({s.R, s.D}, seed),
                       z = random_tensor({s.R, s.D}, seed + 1, -3.f, 3.f);
          const Tensor w = random_tensor({s.D}, seed + 2, 0.5f, 1.5f);
          const Tensor dout = random_tensor({s.R, s.D}, seed + 3),
                       dw0 = random_tensor({s.D}, seed + 4);
          testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
            const Tensor dy = on(ctx, Tensor::zeros(DType::kF32, {s.R, s.D}));
            const auto dz = in_block(ctx, Tensor::zeros(DType::kF32, {s.R, s.D}), 0, 3);
            const Tensor dw = want_dw ? on(ctx, dw0) : Tensor();
            ops::gated_rms_norm_backward(ctx, {.y = on(ctx, y),
                                               .z = in_wider_rows(ctx, z, 0, 3),
                                               .w = gate == Gate::kNoNorm ? Tensor() : on(ctx, w),
                                               .group = group,
                                               .norm_before_gate = gate == Gate::kNormBeforeGate,
                                               .dout = in_wider_rows(ctx, dout, 2, 0),
                                               .dy = dy,
                                               .dz = dz.view,
                                               .dw = dw});
            return testing::outputs({{"dy", dy}, {"dz", dz.rows}, {"dw", dw}});
          });
        }
}

// Prefill's many rows (the cuda backend takes 256 rows or more a warp
// each, in 16-byte pieces, when they are aligned and at most 2,048 wide):
// widths that fill a lane's pieces partly and wholly, norm groups, z a
// column block of a wider row as in_proj's output gives it, in place and
// not. (Other rows take the block kernel of the tests above.)
TEST_P(RmsNormTest, ManyAlignedRowsMatchRef) {
  const int64_t R = 300;  // not a multiple of a block's 8 rows
  for (const int64_t D : {int64_t{768}, int64_t{2048}}) {
    SCOPED_TRACE(::testing::Message() << "rms_norm D " << D);
    const Tensor x = random_tensor({R, D}, D), w = random_tensor({D}, 7, 0.5f, 1.5f);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {R, D}));
      ops::rms_norm(ctx, {.x = on(ctx, x), .w = on(ctx, w), .out = out});
      const Tensor in_place = on(ctx, x);
      ops::rms_norm(ctx, {.x = in_place, .out = in_place});
      return testing::outputs({{"out", out}, {"in place, no weight", in_place}});
    });
  }
  for (const int64_t D : {int64_t{1536}, int64_t{136}})
    for (Gate gate : kGates)
      for (int64_t group : {int64_t{0}, D == 1536 ? int64_t{384} : int64_t{68}})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "gated D " << D << " gate " << static_cast<int>(gate)
                                            << " group " << group << " in place " << in_place);
          const Tensor y = random_tensor({R, D}, D + group),
                       z = random_tensor({R, D}, D + 1, -3.f, 3.f);
          const Tensor w = random_tensor({D}, D + 2, 0.5f, 1.5f);
          testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
            const Tensor yd = on(ctx, y);
            const Tensor out = in_place ? yd : on(ctx, Tensor::zeros(DType::kF32, {R, D}));
            ops::gated_rms_norm(ctx, {.y = yd,
                                      .z = in_wider_rows(ctx, z, 4, 8),
                                      .w = gate == Gate::kNoNorm ? Tensor() : on(ctx, w),
                                      .group = group,
                                      .norm_before_gate = gate == Gate::kNormBeforeGate,
                                      .out = out});
            return testing::outputs({{"out", out}});
          });
        }
}

// The backwards on prefill's many aligned rows (the cuda backend's warp per
// row, in 16-byte pieces, when they are aligned and at most 2,048 wide):
// the 130m model's widths (768; 1536 in one group or four), a width that
// fills a lane's pieces partly (136 in two groups), the widest (2048),
// strided rows, accumulated dx, dw wanted or not.
TEST_P(RmsNormTest, ManyAlignedRowsBackwardMatchRef) {
  const int64_t R = 300;
  for (const int64_t D : {int64_t{768}, int64_t{2048}, int64_t{136}})
    for (const bool want_dw : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "rms_norm_backward D " << D << " dw " << want_dw);
      const Tensor x = random_tensor({R, D}, D), w = random_tensor({D}, 7, 0.5f, 1.5f);
      const Tensor dout = random_tensor({R, D}, D + 1), dx0 = random_tensor({R, D}, D + 2);
      const Tensor dw0 = random_tensor({D}, D + 3);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const Tensor dx = on(ctx, dx0), dw = want_dw ? on(ctx, dw0) : Tensor();
        ops::rms_norm_backward(ctx, {.x = on(ctx, x),
                                     .w = on(ctx, w),
                                     .dout = in_wider_rows(ctx, dout, 4, 8),
                                     .dx = dx,
                                     .accumulate_dx = want_dw,
                                     .dw = dw});
        return testing::outputs({{"dx", dx}, {"dw", dw}});
      });
    }
  for (const int64_t D : {int64_t{1536}, int64_t{136}})
    for (Gate gate : kGates)
      for (int64_t group : {int64_t{0}, D == 1536 ? int64_t{384} : int64_t{68}}) {
        SCOPED_TRACE(::testing::Message() << "gated backward D " << D << " gate "
                                          << static_cast<int>(gate) << " group " << group);
        const Tensor y = random_tensor({R, D}, D + group),
                     z = random_tensor({R, D}, D + 1, -3.f, 3.f);
        const Tensor w = random_tensor({D}, D + 2, 0.5f, 1.5f), dw0 = random_tensor({D}, D + 3);
        const Tensor dout = random_tensor({R, D}, D + 4);
        testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
          const Tensor dy = on(ctx, Tensor::zeros(DType::kF32, {R, D}));
          const Tensor dz = on(ctx, Tensor::zeros(DType::kF32, {R, D}));
          const Tensor dw = gate == Gate::kNoNorm ? Tensor() : on(ctx, dw0);
          ops::gated_rms_norm_backward(ctx, {.y = on(ctx, y),
                                             .z = in_wider_rows(ctx, z, 4, 8),
                                             .w = gate == Gate::kNoNorm ? Tensor() : on(ctx, w),
                                             .group = group,
                                             .norm_before_gate = gate == Gate::kNormBeforeGate,
                                             .dout = on(ctx, dout),
                                             .dy = dy,
                                             .dz = dz,
                                             .dw = dw});
          return testing::outputs({{"dy", dy}, {"dz", dz}, {"dw", dw}});
        });
      }
}

// The grouped norm is the plain RMSNorm of each group of the gated input
// (norm after gate), or the plain gate of each group's RMSNorm (norm before
// gate), with a weight that repeats per group: the same numbers by two
// sequences of ops.
TEST_P(RmsNormTest, GroupsAreRmsNormsOfEachGroup) {
  const int64_t R = 6, G = 4, n = 10, D = G * n;
  const Tensor y = random_tensor({R, D}, 31), z = random_tensor({R, D}, 32, -3.f, 3.f);
  const Tensor w_group = random_tensor({n}, 33, 0.5f, 1.5f);
  Tensor w = Tensor::empty(DType::kF32, {D});
  for (int64_t i = 0; i < D; ++i) w.data<float>()[i] = w_group.data<float>()[i % n];
  Context ctx(GetParam(), 2);
  for (bool before : {false, true}) {
    const Tensor grouped = on(ctx, Tensor::zeros(DType::kF32, {R, D}));
    ops::gated_rms_norm(ctx, {.y = on(ctx, y),
                              .z = on(ctx, z),
                              .w = on(ctx, w),
                              .group = n,
                              .norm_before_gate = before,
                              .out = grouped});
    const Tensor t = on(ctx, Tensor::zeros(DType::kF32, {R, D})), zd = on(ctx, z);
    if (before) {
      ops::rms_norm(ctx, {.x = on(ctx, y).reshape({R * G, n}),
                          .w = on(ctx, w_group),
                          .out = t.reshape({R * G, n})});
      ops::gated_rms_norm(ctx, {.y = t, .z = zd, .out = t});
    } else {
      ops::gated_rms_norm(ctx, {.y = on(ctx, y), .z = zd, .out = t});
      ops::rms_norm(
          ctx, {.x = t.reshape({R * G, n}), .w = on(ctx, w_group), .out = t.reshape({R * G, n})});
    }
    EXPECT_TRUE(testing::close(grouped, t, {1e-6, 1e-7})) << "norm before gate " << before;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RmsNormTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

TEST(RmsNormRef, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t R = 70, D = 12;
  Tensor x = testing::random_f64({R, D}, 5), w = testing::random_f64({D}, 6, 0.5f, 1.5f);
  const Tensor g = testing::random_f64({R, D}, 7);
  Context ctx("ref", 1);
  auto J = [&] {
    const Tensor out = testing::zeros_f64({R, D});
    ref::rms_norm<double>(ctx, {.x = x, .w = w, .out = out});
    return testing::weighted_sum(out, g);
  };
  Tensor gx = testing::fd_gradient(x, J);
  const Tensor gw = testing::fd_gradient(w, J);
  const Tensor dx = testing::zeros_f64({R, D}), dx2 = testing::zeros_f64({R, D}),
               dw = testing::zeros_f64({D});
  ref::rms_norm_backward<double>(ctx, {.x = x, .w = w, .dout = g, .dx = dx, .dw = dw});
  EXPECT_LE(testing::rel_error_f64(dx, gx), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(dw, gw), testing::kFdTolerance);
  // Accumulating twice into zeros gives twice the gradient.
  for (int i = 0; i < 2; ++i)
    ref::rms_norm_backward<double>(ctx,
                                   {.x = x, .w = w, .dout = g, .dx = dx2, .accumulate_dx = true});
  for (int64_t i = 0; i < R * D; ++i) gx.data<double>()[i] *= 2;
  EXPECT_LE(testing::rel_error_f64(dx2, gx), testing::kFdTolerance);
}

class GatedRmsNormRef : public ::testing::TestWithParam<Gate> {};

TEST_P(GatedRmsNormRef, BackwardMatchesFiniteDifferences) {
  const Gate gate = GetParam();
  const int64_t R = 40, D = 12, group = 4;
  Tensor y = testing::random_f64({R, D}, 8), z = testing::random_f64({R, D}, 9, -3.f, 3.f);
  Tensor w = testing::random_f64({D}, 10, 0.5f, 1.5f);
  const Tensor g = testing::random_f64({R, D}, 11);
  const Tensor wt = gate == Gate::kNoNorm ? Tensor() : w;
  const bool before = gate == Gate::kNormBeforeGate;
  Context ctx("ref", 1);
  auto J = [&] {
    const Tensor out = testing::zeros_f64({R, D});
    ref::gated_rms_norm<double>(
        ctx, {.y = y, .z = z, .w = wt, .group = group, .norm_before_gate = before, .out = out});
    return testing::weighted_sum(out, g);
  };
  const Tensor gy = testing::fd_gradient(y, J), gz = testing::fd_gradient(z, J);
  const Tensor gw = testing::fd_gradient(w, J);
  const Tensor dy = testing::zeros_f64({R, D}), dz = testing::zeros_f64({R, D}),
               dw = testing::zeros_f64({D});
  ref::gated_rms_norm_backward<double>(ctx, {.y = y,
                                             .z = z,
                                             .w = wt,
                                             .group = group,
                                             .norm_before_gate = before,
                                             .dout = g,
                                             .dy = dy,
                                             .dz = dz,
                                             .dw = dw});
  EXPECT_LE(testing::rel_error_f64(dy, gy), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(dz, gz), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(dw, gw), testing::kFdTolerance);  // zero without a norm
}

INSTANTIATE_TEST_SUITE_P(Modes, GatedRmsNormRef, ::testing::ValuesIn(kGates));

}  // namespace
}  // namespace ssm
