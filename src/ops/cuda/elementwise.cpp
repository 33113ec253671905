// add, copy, fill, scale and sum_squares on the GPU.
#include "ops/cuda/kernels.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void add(Context& ctx, const Tensor& dst, const Tensor& src, float alpha) {
  launch_add(rows_of(dst), const_rows_of(src), alpha, stream(ctx));
  check_launch("add");
}

void scale(Context& ctx, const Tensor& t, float alpha) {
  launch_scale(rows_of(t), alpha, stream(ctx));
  check_launch("scale");
}

void fill(Context& ctx, const Tensor& dst, float value) {
  if (value == 0.f && dst.is_dense()) {
    // Any dtype: zero bytes are zero in every one.
    if (dst.nbytes()) check(cudaMemsetAsync(const_cast<void*>(dst.raw()), 0, dst.nbytes(), stream(ctx)), "fill");
    return;
  }
  launch_fill(rows_of(dst), value, stream(ctx));
  check_launch("fill");
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  // Dimensions of size 1 carry no stride information; drop them.
  StridedCopy c;
  c.dst = const_cast<void*>(dst.raw());
  c.src = src.raw();
  c.elem_size = static_cast<int>(dtype_size(dst.dtype()));
  c.numel = dst.numel();
  for (int d = 0; d < dst.ndim(); ++d) {
    if (dst.dim(d) == 1) continue;
    if (c.ndim == kMaxCopyDims) throw Error(cat("cuda: copy of more than ", kMaxCopyDims, " dimensions"));
    c.shape[c.ndim] = dst.dim(d);
    c.dst_stride[c.ndim] = dst.stride(d);
    c.src_stride[c.ndim] = src.stride(d);
    ++c.ndim;
  }
  launch_copy(c, stream(ctx));
  check_launch("copy");
}

double sum_squares(Context& ctx, const Tensor& t) {
  Tensor out = ctx.arena().alloc(DType::kF64, {1});
  launch_sum_squares(const_rows_of(t), ops::elements<double>(out), stream(ctx));
  check_launch("sum_squares");
  return out.to(Device::host()).data<double>()[0];
}

}  // namespace

void add_elementwise_kernels(OpTable& t) {
  t.add = &add;
  t.copy = &copy;
  t.fill = &fill;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
}

}  // namespace ssm::cuda
