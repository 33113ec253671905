#include "ssm/ops/elementwise.h"

#include "ops/op_check.h"
#include "ops/tensor_data.h"

namespace ssm::ops {

void add(Context& ctx, const Tensor& dst, const Tensor& src, float alpha) {
  const detail::OpCheck c(ctx, "add");
  c.rows("dst", dst).rows("src", src).expect(dst.shape() == src.shape(), "dst and src differ in shape");
  detail::run(ctx, c.kernel(&OpTable::add), dst, src, alpha);
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  const detail::OpCheck c(ctx, "copy");
  c.expect(dst.defined() && src.defined() && dst.device() == ctx.device() && src.device() == ctx.device(),
           "dst and src must be on the backend's device");
  c.expect(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "dst and src differ in shape or dtype");
  c.expect(dst.dtype() != DType::kQ8, "Q8 tensors are copied with their scales: use clone()");
  c.expect(dst.ndim() == 0 || ((dst.dim(-1) <= 1 || dst.stride(-1) == 1) && (src.dim(-1) <= 1 || src.stride(-1) == 1)),
           "the last dimension must be contiguous");
  detail::run(ctx, c.kernel(&OpTable::copy), dst, src);
}

void fill(Context& ctx, const Tensor& dst, float value) {
  const detail::OpCheck c(ctx, "fill");
  if (value == 0.f && dst.defined() && dst.is_dense()) c.expect(dst.device() == ctx.device(), "dst is not on the backend's device");
  else c.rows("dst", dst);
  detail::run(ctx, c.kernel(&OpTable::fill), dst, value);
}

void scale(Context& ctx, const Tensor& t, float alpha) {
  const detail::OpCheck c(ctx, "scale");
  c.rows("t", t);
  detail::run(ctx, c.kernel(&OpTable::scale), t, alpha);
}

double sum_squares(Context& ctx, const Tensor& t) {
  const detail::OpCheck c(ctx, "sum_squares");
  c.rows("t", t);
  return detail::run(ctx, c.kernel(&OpTable::sum_squares), t);
}

void sum_squares_to(Context& ctx, const Tensor& t, const Tensor& out) {
  const detail::OpCheck c(ctx, "sum_squares_to");
  c.rows("t", t).dense("out", out, {1}, DType::kF64);
  // A host backend has nothing to wait for: its sum, stored.
  if (!ctx.backend().ops().sum_squares_to) {
    const double s = detail::run(ctx, c.kernel(&OpTable::sum_squares), t);
    elements<double>(out)[0] = s;
    return;
  }
  detail::run(ctx, c.kernel(&OpTable::sum_squares_to), t, out);
}

}  // namespace ssm::ops
