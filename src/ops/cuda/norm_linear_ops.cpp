// The few-row projections' host side (decode steps): linear's rows when
// they are few (linear.cpp asks linear_few_rows first), and norm_linear:
// few rows in one launch of the projection kernel, which normalises the
// rows as it loads them (linear_skinny.cu), else the norm and then linear.
// Its own file so that the CPU emulator (scripts/cuda-emulate) links it
// without cuBLAS.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_linear.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/norm_linear_composed.h"

namespace ssm::cuda {
namespace {

bool skinny_type(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// y (+)= x W^T (+ bias) as the few-row kernel's arguments.
SkinnyLinear skinny_of(Context& ctx, const Tensor& x, const Tensor& W, const Tensor& bias, const Tensor& y,
                       bool accumulate) {
  const DType wt = W.dtype();
  SkinnyLinear l;
  l.x = const_rows_of(x);
  l.W = W.raw();
  l.w_stride = W.dim(0) > 1 ? W.row_stride() : x.cols();
  l.type = wt == DType::kF32 ? WeightType::kF32 : (wt == DType::kBF16 ? WeightType::kBF16 : WeightType::kF16);
  l.bias = bias.defined() ? bias.data<float>() : nullptr;
  l.y = rows_of(y);
  l.accumulate = accumulate;
  const CudaResources& r = resources(ctx);
  l.overlap = r.overlap_launches;
  l.one_wave = r.one_wave_projections;
  l.stream_columns = r.stream_columns;
  l.split_k = r.fused_decode == FusedDecode::kSplit;
  return l;
}

void norm_linear(Context& ctx, const ops::NormLinearArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  if (M == 0 || N == 0) return;
  if (!skinny_type(a.W.dtype())) return ops::detail::norm_linear_composed(ctx, a);
  SkinnyLinear l = skinny_of(ctx, a.x, a.W, a.bias, a.y, a.accumulate);
  l.norm = true;
  if (a.gate.defined()) l.gate = const_rows_of(a.gate);
  l.norm_weight = a.norm_weight.defined() ? a.norm_weight.data<float>() : nullptr;
  l.norm_group = a.gate.defined() && a.group > 0 ? a.group : K;
  l.eps = a.eps;
  l.norm_before_gate = a.norm_before_gate;
  // One row only (decode at batch 1): every block normalises all M rows, and
  // at batch 8 (the multi-wave kernel, H200) that made the step 1.7x slower
  // than the separate norm. By default only where the projection runs in one
  // wave, where each block pays the norm once and after its weights' loads
  // are issued; with the multi-wave kernel every wave paid it again and the
  // step was slower (CudaResources::fused_decode).
  const FusedDecode mode = resources(ctx).fused_decode;
  // The norm at warp level (the default) needs neither shared memory nor a
  // barrier, so no wave pays a prologue: one row (decode at batch 1).
  if ((mode == FusedDecode::kWarp || mode == FusedDecode::kSplit) && skinny_warp_norm_fits(l)) {
    l.warp_norm = true;  // split_k as skinny_of set it
    launch_skinny_linear(l, stream(ctx));
    check_launch("norm_linear (few rows, warp norm)");
    return;
  }
  if (M > 1 || mode == FusedDecode::kNever || !skinny_norm_fits(l) ||
      (mode != FusedDecode::kAlways && !skinny_in_one_wave(l)))
    return ops::detail::norm_linear_composed(ctx, a);
  launch_skinny_linear(l, stream(ctx));
  check_launch("norm_linear (few rows)");
}

}  // namespace

bool linear_few_rows(Context& ctx, const ops::LinearArgs& a) {
  if (a.x.rows() > kSkinnyRows || !skinny_type(a.W.dtype())) return false;
  launch_skinny_linear(skinny_of(ctx, a.x, a.W, a.bias, a.y, a.accumulate), stream(ctx));
  check_launch("linear (few rows)");
  return true;
}

void add_norm_linear_kernels(OpTable& t) { t.norm_linear = &norm_linear; }

}  // namespace ssm::cuda
