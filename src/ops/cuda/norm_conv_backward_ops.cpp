// The host side of the norms', conv1d's and ssd_prepare's backward on the
// GPU (no cuBLAS: the CPU emulator builds it, scripts/cuda-emulate): the
// parameter sums' scratch from the context's arena, then the launchers of
// launch_train.h.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

// A kPartialRows x cols scratch for the two-stage parameter sums (the
// launchers write or zero all of it).
float* partial_rows(Context& ctx, int64_t cols) {
  return ops::elements<float>(ctx.arena().alloc(DType::kF32, {kPartialRows, cols}));
}

void sum_partials(Context& ctx, const float* partial, int64_t cols, float* dst) {
  launch_column_sums(ConstRows{partial, kPartialRows, cols, cols}, dst, stream(ctx));
}

void rms_norm_backward(Context& ctx, const ops::RmsNormBackwardArgs& a) {
  Arena::Scope scope(ctx.arena());
  const int64_t D = a.x.cols();
  float* partial = a.dw.defined() ? partial_rows(ctx, D) : nullptr;
  launch_rms_norm_backward(const_rows_of(a.x), a.w.defined() ? a.w.data<float>() : nullptr, a.eps,
                           const_rows_of(a.dout), rows_of(a.dx), a.accumulate_dx, partial,
                           stream(ctx));
  if (partial) sum_partials(ctx, partial, D, ops::elements<float>(a.dw));
  check_launch("rms_norm_backward");
}

void gated_rms_norm_backward(Context& ctx, const ops::GatedRmsNormBackwardArgs& a) {
  Arena::Scope scope(ctx.arena());
  const int64_t D = a.y.cols();
  float* partial = a.dw.defined() && a.w.defined() ? partial_rows(ctx, D) : nullptr;
  launch_gated_rms_norm_backward(const_rows_of(a.y), const_rows_of(a.z),
                                 a.w.defined() ? a.w.data<float>() : nullptr, a.group, a.eps,
                                 a.norm_before_gate, const_rows_of(a.dout), rows_of(a.dy),
                                 rows_of(a.dz), partial, stream(ctx));
  if (partial) sum_partials(ctx, partial, D, ops::elements<float>(a.dw));
  check_launch("gated_rms_norm_backward");
}

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  if (K > 17)
    throw Error(
        cat("op 'conv1d_backward': backend 'cuda' takes kernels of at most 17 taps, not ", K));
  if (B * L * C == 0) return;
  Arena::Scope scope(ctx.arena());
  const bool params = a.dweight.defined() || a.dbias.defined();
  Conv1dBackwardLaunch l{const_rows_of(a.in),
                         const_rows_of(a.dout),
                         a.weight.data<float>(),
                         a.bias.defined() ? a.bias.data<float>() : nullptr,
                         rows_of(a.din),
                         K > kConv1dOnePassTaps
                             ? ops::elements<float>(ctx.arena().alloc(DType::kF32, {B * L, C}))
                             : nullptr,
                         params ? partial_rows(ctx, C * (K + 1)) : nullptr,
                         B,
                         L,
                         C,
                         K,
                         a.silu};
  launch_conv1d_backward(l, stream(ctx));
  if (params) {
    // The partial rows hold C*K taps, then C biases: each part summed
    // straight into its (dense) gradient.
    const int64_t cols = C * (K + 1);
    const cudaStream_t s = stream(ctx);
    if (a.dweight.defined())
      launch_column_sums(ConstRows{l.partial, kPartialRows, C * K, cols},
                         ops::elements<float>(a.dweight), s);
    if (a.dbias.defined())
      launch_column_sums(ConstRows{l.partial + C * K, kPartialRows, C, cols},
                         ops::elements<float>(a.dbias), s);
  }
  check_launch("conv1d_backward");
}

void ssd_prepare_backward(Context& ctx, const ops::SsdPrepareBackwardArgs& a) {
  launch_ssd_prepare_backward(const_rows_of(a.dt_raw), a.dt_bias.data<float>(),
                              a.A_log.data<float>(), a.dt_min, a.dt_max, const_rows_of(a.ddt),
                              a.dA.data<float>(), rows_of(a.ddt_raw),
                              ops::elements_or_null<float>(a.ddt_bias),
                              ops::elements_or_null<float>(a.dA_log), stream(ctx));
  check_launch("ssd_prepare_backward");
}

}  // namespace

void add_norm_conv_backward_kernels(OpTable& t) {
  t.rms_norm_backward = &rms_norm_backward;
  t.gated_rms_norm_backward = &gated_rms_norm_backward;
  t.conv1d_backward = &conv1d_backward;
  t.ssd_prepare_backward = &ssd_prepare_backward;
}

}  // namespace ssm::cuda
