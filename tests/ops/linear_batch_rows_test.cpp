// Batched decoding (2 to 8 rows of x: the matrix-vector kernels) gives each
// row exactly the bits it gets alone (M = 1), for every weight dtype, with
// row lengths K that leave tails of every kind (shorter than a vector, a
// partial pair of BF16 vectors, a partial block of Q8 activations) and
// weight row counts that leave partial groups of rows: a batch must not
// change what a sequence generates. M = 9 (the product over all rows) is
// held to ref by the other linear tests, not to the bits of M = 1.
#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

using testing::random_tensor;

TEST(LinearBatchRows, EachRowEqualsItselfAlone) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8})
    for (int64_t K : {7, 33, 100, 200, 768})
      for (int64_t N : {13, 130}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " K " << K << " N " << N);
        const Tensor W = random_tensor({N, K}, 10 * K + N).to_dtype(dtype);
        const Tensor bias = random_tensor({N}, 3);
        const Tensor x = random_tensor({8, K}, K + 1);
        Context ctx("cpu", 2);
        std::vector<Tensor> alone;
        for (int64_t m = 0; m < 8; ++m) {
          const Tensor y = Tensor::empty(DType::kF32, {1, N});
          ops::linear(ctx, {.x = x.rows(m, m + 1), .W = W, .bias = bias, .y = y});
          alone.push_back(y);
        }
        for (int64_t M = 1; M <= 8; ++M) {
          const Tensor y = Tensor::empty(DType::kF32, {M, N});
          ops::linear(ctx, {.x = x.rows(0, M), .W = W, .bias = bias, .y = y});
          for (int64_t m = 0; m < M; ++m)
            EXPECT_TRUE(testing::bitwise_equal(y.rows(m, m + 1), alone[m]))
                << "row " << m << " of " << M;
        }
      }
}

}  // namespace
}  // namespace ssm
