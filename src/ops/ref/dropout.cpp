// Dropout element by element: the mask bit and the product of x by the
// float scale in double (exact: two floats' product fits a double), rounded
// once to float, as a float multiply is.
#include "ops/dropout_mask.h"
#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

void dropout(Context&, const ops::DropoutArgs& a) {
  const ops::dropout_mask::Draw d = ops::dropout_mask::draw(a.p, a.seed, a.step, a.site);
  const ops::Rows<float> rows(a.t);
  const int64_t cols = a.t.cols();
  for (int64_t r = 0; r < a.t.rows(); ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t i = static_cast<uint64_t>(r * cols + c);
      const double v = static_cast<double>(rows[r][c]) * static_cast<double>(d.scale);
      rows[r][c] = ops::dropout_mask::keep(d.key, i, d.threshold) ? static_cast<float>(v) : 0.f;
    }
}

}  // namespace

void add_dropout_kernels(OpTable& t) {
  t.dropout = &dropout;
  t.dropout_backward = &dropout;  // the same mask times dy / (1 - p)
}

}  // namespace ssm::ref
