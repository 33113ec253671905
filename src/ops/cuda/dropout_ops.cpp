// ops::dropout and its backward on the GPU: the draw's key, threshold and
// scale computed here on the host, as the host backends compute them.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_dropout.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/dropout_mask.h"

namespace ssm::cuda {
namespace {

void dropout(Context& ctx, const ops::DropoutArgs& a) {
  const ops::dropout_mask::Draw d = ops::dropout_mask::draw(a.p, a.seed, a.step, a.site);
  launch_dropout(rows_of(a.t), d.key, d.threshold, d.scale, stream(ctx));
  check_launch("dropout");
}

}  // namespace

void add_dropout_kernels(OpTable& t) {
  t.dropout = &dropout;
  t.dropout_backward = &dropout;  // the same mask times dy / (1 - p)
}

}  // namespace ssm::cuda
