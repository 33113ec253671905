// Dropout, parallel over rows once a tensor pays for threads; each element's
// mask bit is a hash of its index, so the split does not change it.
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/dropout_mask.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

void dropout(Context& ctx, const ops::DropoutArgs& a) {
  const ops::dropout_mask::Draw d = ops::dropout_mask::draw(a.p, a.seed, a.step, a.site);
  const ops::Rows<float> rows(a.t);
  const int64_t cols = a.t.cols();
  parallel_items(ctx.pool(), a.t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* v = rows[r];
      const uint64_t first = static_cast<uint64_t>(r * cols);
      for (int64_t c = 0; c < cols; ++c)
        v[c] = ops::dropout_mask::keep(d.key, first + static_cast<uint64_t>(c), d.threshold)
                   ? v[c] * d.scale
                   : 0.f;
    }
  });
}

}  // namespace

void add_dropout_kernels(OpTable& t) {
  t.dropout = &dropout;
  t.dropout_backward = &dropout;  // the same mask times dy / (1 - p)
}

}  // namespace ssm::cpu
