// linear with F16, BF16 and Q8 weights on every backend against ref given the
// same stored weights: ref reads each stored value exactly and sums in
// double, so a backend differs only by its F32 accumulation (the F32
// tolerance), on every path (matrix-vector for M <= 8 with row groups of 4,
// widened blocks and sgemm above), with row tails shorter than a vector,
// bias, accumulation and strided rows. Also embedding lookups from such a
// table (a tied head converted at load).
#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ssm/ops/embedding.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

using testing::on;
using testing::on_rows;
using testing::random_tensor;

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
  return std::get<0>(info.param) + "_" + std::string(dtype_name(std::get<1>(info.param)));
}

class LinearLowpTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(LinearLowpTest, MatchesRefOnTheSameStoredWeights) {
  const auto& [backend, dtype] = GetParam();
  // K 7 and 33: tails shorter than any vector; M 1..8 the matrix-vector
  // path (5: a full row group and one of 1); M 9 and 100 the widened sgemm
  // path with a block of rows that is not full (N 200, 300).
  for (const auto& [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 13},
                               {2, 64, 65},
                               {5, 33, 200},
                               {8, 256, 130},
                               {9, 17, 200},
                               {100, 64, 300}})
    for (bool bias : {false, true})
      for (bool accumulate : {false, true})
        for (bool strided : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " K " << K << " N " << N << " bias "
                                            << bias << " accumulate " << accumulate << " strided "
                                            << strided);
          const uint64_t seed = M * 1000 + N + bias * 7 + accumulate * 3;
          const Tensor x = random_tensor({M, K}, seed);
          const Tensor W = random_tensor({N, K}, seed + 1).to_dtype(dtype);
          const Tensor b = random_tensor({N}, seed + 2), y0 = random_tensor({M, N}, seed + 3);
          testing::expect_matches_ref(
              backend,
              [&](Context& ctx) -> testing::Outputs {
                const auto y = testing::in_block(ctx, y0, strided, 5, 2);
                ops::linear(ctx, {.x = on_rows(ctx, x, strided, 3, 4),
                                  .W = on(ctx, W),
                                  .bias = bias ? on(ctx, b) : Tensor(),
                                  .y = y.view,
                                  .accumulate = accumulate});
                return testing::outputs({{"y", y.rows}});
              },
              {.tol = testing::tolerance_for(DType::kF32), .threads = {1, 2, 3}});
        }
}

// A row block of a converted matrix (the head's rows(0, V)) reads its own
// rows and scales.
TEST_P(LinearLowpTest, RowBlockOfConvertedWeights) {
  const auto& [backend, dtype] = GetParam();
  const Tensor x = random_tensor({3, 40}, 5);
  const Tensor W = random_tensor({96, 40}, 6).to_dtype(dtype);
  testing::expect_matches_ref(backend, [&](Context& ctx) -> testing::Outputs {
    const Tensor y = on(ctx, Tensor::zeros(DType::kF32, {3, 50}));
    ops::linear(ctx, {.x = on(ctx, x), .W = on(ctx, W).rows(30, 80), .y = y});
    return testing::outputs({{"y", y}});
  }, {.tol = testing::tolerance_for(DType::kF32)});
}

TEST_P(LinearLowpTest, EmbeddingFromConvertedTable) {
  const auto& [backend, dtype] = GetParam();
  const Tensor table = random_tensor({20, 37}, 8).to_dtype(dtype);
  Tensor ids = Tensor::empty(DType::kI64, {2, 3});
  const int64_t values[] = {0, 19, 4, 4, 7, 12};
  for (int i = 0; i < 6; ++i) ids.data<int64_t>()[i] = values[i];
  for (float scale : {1.f, 2.5f})
    testing::expect_matches_ref(backend, [&](Context& ctx) -> testing::Outputs {
      const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {2, 3, 37}));
      ops::embedding(ctx, {.ids = on(ctx, ids), .table = on(ctx, table), .out = out, .scale = scale});
      return testing::outputs({{"out", out}});
    }, {.tol = testing::tolerance_for(DType::kF32)});
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearLowpTest,
                         ::testing::Combine(::testing::ValuesIn(testing::all_backends()),
                                            ::testing::Values(DType::kF16, DType::kBF16, DType::kQ8)),
                         case_name);

}  // namespace
}  // namespace ssm
