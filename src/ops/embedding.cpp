#include "ssm/ops/embedding.h"

#include "ops/op_check.h"

namespace ssm::ops {
namespace {

void check_ids(const detail::OpCheck& c, const Tensor& ids) {
  c.expect(ids.defined() && (ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32) && ids.is_dense(),
           "ids must be dense I64 or I32");
}

}  // namespace

void embedding(Context& ctx, const EmbeddingArgs& a) {
  const detail::OpCheck c(ctx, "embedding");
  check_ids(c, a.ids);
  c.expect(a.table.defined() && a.table.ndim() == 2, "table must be (V, D)");
  // 16- and 8-bit tables too: a tied head converted for inference.
  const DType t = a.table.dtype();
  c.expect(t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8,
           "table must be F32, F16, BF16 or Q8");
  c.dense("table", a.table, a.table.shape(), t);
  c.rows("out", a.out, a.ids.numel(), a.table.dim(1));
  c.expect(a.ids.device() == ctx.device(), "ids are not on the backend's device");
  detail::run(ctx, c.kernel(&OpTable::embedding), a);
}

void embedding_backward(Context& ctx, const EmbeddingBackwardArgs& a) {
  const detail::OpCheck c(ctx, "embedding_backward");
  check_ids(c, a.ids);
  c.expect(a.dtable.defined() && a.dtable.ndim() == 2, "dtable must be (V, D)");
  c.dense("dtable", a.dtable, a.dtable.shape());
  c.rows("dout", a.dout, a.ids.numel(), a.dtable.dim(1));
  c.expect(a.ids.device() == ctx.device(), "ids are not on the backend's device");
  if (a.host_ids.defined())
    c.host("host_ids", a.host_ids, a.ids.shape(), a.ids.dtype());
  detail::run(ctx, c.kernel(&OpTable::embedding_backward), a);
}

}  // namespace ssm::ops
