// Pointwise activations, element by element in double.
#include <algorithm>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

void relu_squared(Context&, const Tensor& t) {
  const ops::Rows<float> rows(t);
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double v = std::max(0.0, static_cast<double>(rows[r][c]));
      rows[r][c] = static_cast<float>(v * v);
    }
}

}  // namespace

void add_activation_kernels(OpTable& t) { t.relu_squared = &relu_squared; }

}  // namespace ssm::ref
