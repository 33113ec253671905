// Pointwise activations, element by element in double.
#include <algorithm>
#include <cmath>

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

void gelu_product(Context&, const Tensor& gate, const Tensor& t) {
  const ops::Rows<float> g(gate), rows(t);
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double v = g[r][c];
      const double gelu = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      rows[r][c] = static_cast<float>(gelu * rows[r][c]);
    }
}

}  // namespace

void add_activation_kernels(OpTable& t) {
  t.relu_squared = &relu_squared;
  t.gelu_product = &gelu_product;
}

}  // namespace ssm::ref
