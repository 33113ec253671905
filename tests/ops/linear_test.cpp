// linear and linear_backward on every backend against ref: the cpu paths
// (matrix-vector for M <= 8, row and column splits of sgemm), strided rows,
// accumulation, low-precision weights; and ref's backward against finite
// differences of its forward in double.
#include "ops/ref/linear.h"

#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

using testing::on;
using testing::on_rows;
using testing::random_tensor;

struct LinearShape {
  int64_t M, K, N;
};

class LinearTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LinearTest, MatchesRefOnEveryPath) {
  // M <= 8: matrix-vector path; (9, 200) on 3 threads: column split; the
  // rest: row blocks of 16, one not full.
  for (const LinearShape s : {LinearShape{1, 7, 13},
                              {3, 33, 70},
                              {8, 64, 300},
                              {9, 17, 200},
                              {40, 31, 50},
                              {100, 64, 129}})
    for (bool bias : {false, true})
      for (bool accumulate : {false, true})
        for (bool strided : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "M " << s.M << " K " << s.K << " N " << s.N << " bias " << bias
                       << " accumulate " << accumulate << " strided " << strided);
          const uint64_t seed = s.M * 1000 + s.N + bias * 7 + accumulate * 3;
          const Tensor x = random_tensor({s.M, s.K}, seed), W = random_tensor({s.N, s.K}, seed + 1);
          const Tensor b = random_tensor({s.N}, seed + 2), y0 = random_tensor({s.M, s.N}, seed + 3);
          auto run = [&](Context& ctx) -> testing::Outputs {
            const auto y = testing::in_block(ctx, y0, strided, 5, 2);
            ops::linear(ctx, {.x = on_rows(ctx, x, strided, 3, 4),
                              .W = on(ctx, W),
                              .bias = bias ? on(ctx, b) : Tensor(),
                              .y = y.view,
                              .accumulate = accumulate});
            return testing::outputs({{"y", y.rows}});
          };
          testing::expect_matches_ref(GetParam(), run,
                                      {.threads = {1, 2, 3}, .thread_invariant = s.M <= 8});
        }
}

// Few rows (decode steps: cuda's few-row kernels, linear_skinny.cu) with
// each weight type and M = 1, 3, 8: the shapes of a 130m decode step's
// in_proj and out_proj (K 768 and 1,536: 3 and 6 pieces a lane a bf16
// column), columns that leave the one-wave grid's last warp part of its
// share (1,001, 769, 2,501: on the emulator's 528 warps two, two and five
// columns a warp; on an H100's about 2,100, two for the last), rows too
// long for one wave's registers (4,096: 16 pieces a lane), and K not a
// multiple of a 16-byte piece (36 for 16-bit weights, 770: the scalar
// kernel). Each backend's result is the same at 1 and 2 threads (the GPU's:
// deterministic).
TEST_P(LinearTest, FewRowsMatchRefForEveryWeightType) {
  struct Case {
    int64_t K, N;
  };
  // 4500 columns of 768: cuda's column-streaming kernel at one row (the head).
  for (const Case s : {Case{768, 1001}, {1536, 769}, {64, 2501}, {4096, 40}, {36, 300}, {770, 65}, {768, 4500}})
    for (const int64_t M : {1, 3, 8})
      for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(::testing::Message() << "M " << M << " K " << s.K << " N " << s.N << " " << dtype_name(dtype));
        const uint64_t seed = M * 10000 + s.N + s.K;
        const Tensor x = random_tensor({M, s.K}, seed, -2.f, 2.f);
        const Tensor W = random_tensor({s.N, s.K}, seed + 1, -0.1f, 0.1f).to_dtype(dtype);
        const Tensor b = random_tensor({s.N}, seed + 2);
        auto run = [&](Context& ctx) -> testing::Outputs {
          const Tensor y = on(ctx, Tensor::zeros(DType::kF32, {M, s.N}));
          ops::linear(ctx, {.x = on(ctx, x), .W = on(ctx, W), .bias = on(ctx, b), .y = y});
          return testing::outputs({{"y", y}});
        };
        // The GPU widens stored weights exactly (F32 products); the cpu's
        // BF16 and F16 paths may round the activations.
        const testing::Tolerance tol = testing::kGpuTests || dtype == DType::kF32
                                           ? testing::Tolerance{}
                                           : testing::tolerance_for(dtype);
        testing::expect_matches_ref(GetParam(), run, {.tol = tol});
      }
}

// More rows than a decode step with 16-bit weights and a column count that
// is not a multiple of 8, into rows padded to one (the decode step's logits)
// or not: cuda's GEMMs split the columns there (the aligned ones, then the
// rest), and accumulate into y on both sides of the split.
TEST_P(LinearTest, ManyRowsWithUnalignedColumnCount) {
  for (const int64_t N : {77, 1001, 64})
    for (const int64_t M : {20, 64})
      for (const DType dtype : {DType::kBF16, DType::kF16})
        for (const bool padded : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " " << dtype_name(dtype)
                                            << (padded ? " padded" : ""));
          const int64_t K = 96, width = padded ? (N + 7) / 8 * 8 : N + 3;
          const uint64_t seed = M * 1000 + N;
          const Tensor x = random_tensor({M, K}, seed, -2.f, 2.f);
          const Tensor W = random_tensor({N, K}, seed + 1, -0.1f, 0.1f).to_dtype(dtype);
          const Tensor y0 = random_tensor({M, width}, seed + 2);
          auto run = [&](Context& ctx) -> testing::Outputs {
            const Tensor y = on(ctx, y0);
            ops::linear(ctx, {.x = on(ctx, x), .W = on(ctx, W), .y = y.cols(0, N), .accumulate = true});
            return testing::outputs({{"y", y}});
          };
          const testing::Tolerance tol =
              testing::kGpuTests ? testing::Tolerance{} : testing::tolerance_for(dtype);
          testing::expect_matches_ref(GetParam(), run, {.tol = tol});
        }
}

// A backend computes F16, BF16 and Q8 weights within the dtype's tolerance
// of ref, or refuses them with an error naming the op, itself and the dtype.
TEST_P(LinearTest, LowPrecisionWeightsAreComputedOrRefusedByName) {
  const Tensor x = random_tensor({5, 40}, 1), W = random_tensor({24, 40}, 2);
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kQ8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor Wq = W.to_dtype(dtype);
    Context ref_ctx("ref", 1);
    Tensor want = Tensor::zeros(DType::kF32, {5, 24});
    // ref reads the stored values exactly: equal to the product with their F32 widening.
    ops::linear(ref_ctx, {.x = x, .W = Wq.to_f32(), .y = want});
    Context ctx(GetParam(), 2);
    const Tensor y = on(ctx, Tensor::zeros(DType::kF32, {5, 24}));
    try {
      ops::linear(ctx, {.x = on(ctx, x), .W = on(ctx, Wq), .y = y});
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'linear'"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + GetParam() + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string(dtype_name(dtype))), std::string::npos) << what;
      EXPECT_NE(GetParam(), "ref") << "ref must support every weight type";
      continue;
    }
    EXPECT_TRUE(testing::close(
        y, want,
        GetParam() == "ref" ? testing::Tolerance{1e-6, 1e-7} : testing::tolerance_for(dtype)));
  }
}

TEST_P(LinearTest, BackwardMatchesRef) {
  for (const LinearShape s : {LinearShape{1, 5, 40}, {7, 5, 40}, {70, 33, 65}, {150, 97, 203}})
    for (bool strided : {false, true})
      for (bool accumulate_dx : {false, true})
        for (int wanted = 0; wanted < 3; ++wanted) {  // all, only dx, only dW and dbias
          SCOPED_TRACE(::testing::Message()
                       << "M " << s.M << " strided " << strided << " accumulate_dx "
                       << accumulate_dx << " wanted " << wanted);
          const uint64_t seed = s.M * 100 + strided + 10 * wanted;
          const Tensor x = random_tensor({s.M, s.K}, seed), W = random_tensor({s.N, s.K}, seed + 1);
          const Tensor dy = random_tensor({s.M, s.N}, seed + 2);
          const Tensor dx0 = random_tensor({s.M, s.K}, seed + 3);
          const Tensor dW0 = random_tensor({s.N, s.K}, seed + 4),
                       db0 = random_tensor({s.N}, seed + 5);
          testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
            const auto dx =
                wanted != 2 ? testing::in_block(ctx, dx0, strided, 2, 1) : testing::BlockOutput{};
            const Tensor dW = wanted != 1 ? on(ctx, dW0) : Tensor();
            const Tensor db = wanted != 1 ? on(ctx, db0) : Tensor();
            ops::linear_backward(ctx, {.x = on_rows(ctx, x, strided, 1, 3),
                                       .W = on(ctx, W),
                                       .dy = on_rows(ctx, dy, strided, 4, 0),
                                       .dx = dx.view,
                                       .accumulate_dx = accumulate_dx,
                                       .dW = dW,
                                       .dbias = db});
            return testing::outputs({{"dx", dx.rows}, {"dW", dW}, {"dbias", db}});
          });
        }
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

TEST(LinearRef, BackwardMatchesFiniteDifferences) {
  const int64_t M = 7, K = 5, N = 40;
  Tensor x = testing::random_f64({M, K}, 1), W = testing::random_f64({N, K}, 2);
  Tensor b = testing::random_f64({N}, 3);
  const Tensor w = testing::random_f64({M, N}, 4);
  Context ctx("ref", 1);
  auto J = [&] {
    const Tensor y = testing::zeros_f64({M, N});
    ref::linear<double>(ctx, {.x = x, .W = W, .bias = b, .y = y});
    return testing::weighted_sum(y, w);
  };
  const Tensor gx = testing::fd_gradient(x, J), gW = testing::fd_gradient(W, J);
  const Tensor gb = testing::fd_gradient(b, J);
  const Tensor dx = testing::zeros_f64({M, K}), dW = testing::zeros_f64({N, K});
  const Tensor db = testing::zeros_f64({N});
  ref::linear_backward<double>(ctx, {.x = x, .W = W, .dy = w, .dx = dx, .dW = dW, .dbias = db});
  EXPECT_LE(testing::rel_error_f64(dx, gx), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(dW, gW), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(db, gb), testing::kFdTolerance);
}

}  // namespace
}  // namespace ssm
