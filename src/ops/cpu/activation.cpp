// Pointwise activations, parallel over rows once a tensor pays for threads.
#include <algorithm>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

void relu_squared(Context& ctx, const Tensor& t) {
  const ops::Rows<float> rows(t);
  const int64_t cols = t.cols();
  parallel_items(ctx.pool(), t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* v = rows[r];
      for (int64_t c = 0; c < cols; ++c) {
        const float p = std::max(0.f, v[c]);
        v[c] = p * p;
      }
    }
  });
}

}  // namespace

void add_activation_kernels(OpTable& t) { t.relu_squared = &relu_squared; }

}  // namespace ssm::cpu
