// One decode step of the Mamba-2 recurrence (L = 1), per batch row b and
// head h, with the state updated in place:
//   S <- exp(dt A) S + dt x B^T,   y = S C + D x.
// The state is read and written once per step (step_kernels.h: one pass
// over each row of S fuses the decay, the rank-1 update and the dot product
// with C). Work is split over (batch row, head), handed out dynamically
// (each head's result is the same whichever thread runs it). A BF16 state
// is read and written in place, row by row, widened and rounded in
// registers (step_kernels.h).
//
// Also the fused decode step between the projections (ops::ssd_step): the
// convolution and the scan's step in one pool loop, each head's x channels
// convolved by the thread that steps the head, right before it.
#include <cmath>

#include "ops/cpu/conv1d.h"
#include "ops/cpu/ssd.h"
#include "ops/cpu/step_kernels.h"
#include "ops/ssd_step_composed.h"
#include "ops/tensor_data.h"
#include "ssm/ops/rms_norm.h"

namespace ssm::cpu {
namespace {

// The step's arguments as raw pointers and row strides, read once per call.
struct StepView {
  int64_t H, P, N, G;
  const float *x, *B, *C, *dt, *A, *D;
  int64_t ldx, ldb, ldc, ldt, ldy;
  float *y, *state = nullptr;
  uint16_t* state16 = nullptr;

  StepView(const ops::SsdScanArgs& a, const Tensor& st) {
    H = a.A.dim(0), G = a.groups, P = a.x.cols() / H, N = a.B.cols() / G;
    x = a.x.data<float>(), B = a.B.data<float>(), C = a.C.data<float>(), dt = a.dt.data<float>();
    A = a.A.data<float>(), D = ops::elements_or_null<float>(a.D);
    ldx = a.x.row_stride(), ldb = a.B.row_stride(), ldc = a.C.row_stride();
    ldt = a.dt.row_stride(), ldy = a.y.row_stride();
    y = ops::elements<float>(a.y);
    if (st.dtype() == DType::kBF16)
      state16 = static_cast<uint16_t*>(const_cast<void*>(st.raw()));
    else
      state = ops::elements<float>(st);
  }
};

void step_head(const StepView& v, int64_t b, int64_t h) {
  const int64_t P = v.P, N = v.N, g = h / (v.H / v.G);
  const float dt = v.dt[b * v.ldt + h];
  ssd_step_head({.P = P,
                 .N = N,
                 .dt = dt,
                 .decay = std::exp(dt * v.A[h]),
                 .d = v.D ? v.D[h] : 0.f,
                 .x = v.x + b * v.ldx + h * P,
                 .B = v.B + b * v.ldb + g * N,
                 .C = v.C + b * v.ldc + g * N,
                 .y = v.y + b * v.ldy + h * P,
                 .S = v.state ? v.state + (b * v.H + h) * P * N : nullptr,
                 .S16 = v.state16 ? v.state16 + (b * v.H + h) * P * N : nullptr});
}

// The step of every (batch row, head), before_head(b, h) run right before
// each head's step by the thread that steps it.
template <typename BeforeHead>
void step_heads(Context& ctx, const ops::SsdScanArgs& a, BeforeHead&& before_head) {
  const int64_t Bn = a.x.dim(0), H = a.A.dim(0), G = a.groups;
  const int64_t P = a.x.cols() / H, N = a.B.cols() / G;
  // Without a state the step starts from zeros (arena workspace, reused).
  const Tensor state =
      a.state.defined() ? a.state : ctx.arena().zeros(DType::kF32, {Bn * H, P * N});
  const StepView v(a, state);
  ctx.pool().parallel_for_dynamic(Bn * H, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      before_head(i / H, i % H);
      step_head(v, i / H, i % H);
    }
  });
}

}  // namespace

void ssd_step(Context& ctx, const ops::SsdScanArgs& a) {
  step_heads(ctx, a, [](int64_t, int64_t) {});
}

// What ops::detail::ssd_step_composed computes (conv1d, ssd_prepare,
// ssd_scan, gated_rms_norm), and to the same bits: a channel's convolution
// and a head's step are the same code on the same values, only where they
// run moved. A batch-1 step used to convolve all H*P + 2GN channels on the
// calling thread (too little work to wake the pool for) while the other
// thread waited for the scan's loop; now the calling thread convolves only
// the B and C channels, which every head reads, and works out dt, and each
// head's P channels of x are convolved inside the loop over heads.
void ssd_decode_step(Context& ctx, const ops::SsdStepArgs& a) {
  const int64_t Bn = a.z.dim(0), H = a.dt_bias.dim(0), HP = a.z.cols(), C = a.xbc.cols(), P = HP / H;
  const ops::detail::SsdStepScratch s = ops::detail::ssd_step_begin(ctx, a);
  const ops::Conv1dArgs conv{.in = a.xbc,
                             .weight = a.conv_weight,
                             .bias = a.conv_bias,
                             .state = a.conv_state,
                             .out = s.xbc,
                             .silu = true};
  for (int64_t b = 0; b < Bn; ++b) conv1d_step_channels(conv, b, HP, C);
  step_heads(ctx, s.scan_args(a),
             [&conv, P](int64_t b, int64_t h) { conv1d_step_channels(conv, b, h * P, (h + 1) * P); });
  ops::detail::ssd_step_end(ctx, a, s);
}

}  // namespace ssm::cpu
