// norm_linear on the GPU: few rows (decode steps) in one launch of the
// few-row projection kernel, which normalises the rows as it loads them
// (linear_skinny.cu); more rows, Q8 weights or rows too wide for its shared
// memory as the norm and then linear. Its own file so that the CPU emulator
// (scripts/cuda-emulate) links it without cuBLAS.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_linear.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/norm_linear_composed.h"

namespace ssm::cuda {
namespace {

void norm_linear(Context& ctx, const ops::NormLinearArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  if (M == 0 || N == 0) return;
  const DType wt = a.W.dtype();
  SkinnyLinear l;
  l.x = const_rows_of(a.x);
  l.W = a.W.raw();
  l.w_stride = N > 1 ? a.W.row_stride() : K;
  l.type = wt == DType::kF32 ? WeightType::kF32 : (wt == DType::kBF16 ? WeightType::kBF16 : WeightType::kF16);
  l.bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  l.y = rows_of(a.y);
  l.accumulate = a.accumulate;
  l.overlap = resources(ctx).overlap_launches;
  l.norm = true;
  if (a.gate.defined()) l.gate = const_rows_of(a.gate);
  l.norm_weight = a.norm_weight.defined() ? a.norm_weight.data<float>() : nullptr;
  l.norm_group = a.gate.defined() && a.group > 0 ? a.group : K;
  l.eps = a.eps;
  l.norm_before_gate = a.norm_before_gate;
  const bool skinny_type = wt == DType::kF32 || wt == DType::kBF16 || wt == DType::kF16;
  // One row only (decode at batch 1): every block normalises all M rows, and
  // at batch 8 (first version, H200) that made the step 1.7x slower than
  // the separate norm. Only with SSM_CUDA_FUSED_DECODE=1 (CudaResources::fused_decode).
  if (M > 1 || !resources(ctx).fused_decode || !skinny_type || !skinny_norm_fits(l))
    return ops::detail::norm_linear_composed(ctx, a);
  launch_skinny_linear(l, stream(ctx));
  check_launch("norm_linear (few rows)");
}

}  // namespace

void add_norm_linear_kernels(OpTable& t) { t.norm_linear = &norm_linear; }

}  // namespace ssm::cuda
