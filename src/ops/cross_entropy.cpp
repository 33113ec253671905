#include "ssm/ops/cross_entropy.h"

#include "ops/op_check.h"
#include "ops/tensor_data.h"

namespace ssm::ops {

double head_cross_entropy(Context& ctx, const HeadLossArgs& a) {
  const detail::OpCheck c(ctx, "head_cross_entropy");
  c.rows("f", a.f);
  const int64_t R = a.f.rows(), D = a.f.cols();
  c.expect(a.head.defined() && a.head.ndim() == 2 && a.head.dim(0) >= a.vocab && a.vocab > 0,
           "head must have at least vocab rows");
  c.dense("head", a.head, {a.head.dim(0), D});
  // A device backend takes them on its device too (a training step queues
  // them there); those are not read back to be checked (a wait for the
  // device): the kernel takes one outside the vocabulary as no target.
  const bool targets_on_device =
      a.targets.defined() && !ctx.device().is_host() && a.targets.device() == ctx.device();
  if (targets_on_device) c.dense("targets", a.targets, {R}, DType::kI64);
  else c.host("targets", a.targets, {R}, DType::kI64);
  if (a.grad_scale != 0) c.rows("df", a.df, R, D);
  if (a.dhead.defined()) c.dense("dhead", a.dhead, {a.dhead.dim(0), D}).expect(a.dhead.dim(0) >= a.vocab, "dhead too small");
  if (a.row_loss.defined()) c.host("row_loss", a.row_loss, {R}, DType::kF64);
  if (a.sum_out.defined()) {
    c.dense("sum_out", a.sum_out, {1}, DType::kF64).expect(!a.row_loss.defined(), "sum_out is not taken with row_loss");
  }
  if (!targets_on_device) {
    const int64_t* t = a.targets.data<int64_t>();
    for (int64_t r = 0; r < R; ++r) c.expect(t[r] >= -1 && t[r] < a.vocab, "a target is outside the vocabulary");
  }
  const double sum = detail::run(ctx, c.kernel(&OpTable::head_cross_entropy), a);
  // A host backend returns its sum: stored where the caller wants it.
  if (a.sum_out.defined() && ctx.device().is_host()) {
    elements<double>(a.sum_out)[0] = sum;
    return 0;
  }
  return sum;
}

}  // namespace ssm::ops
