// ssd_step on the GPU: the fused Mamba-2 decode step (two launches instead
// of the five of conv1d, ssd_prepare, ssd_scan and gated_rms_norm), its
// own file so that the CPU emulator (scripts/cuda-emulate) links it alone.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/ssd_step_composed.h"

namespace ssm::cuda {
namespace {

void ssd_step(Context& ctx, const ops::SsdStepArgs& a) {
  SsdStepLaunch l;
  l.B = a.z.dim(0);
  l.H = a.dt_bias.dim(0);
  l.P = a.z.cols() / l.H;
  l.G = a.groups;
  l.N = (a.xbc.cols() - l.H * l.P) / (2 * l.G);
  l.K = a.conv_weight.dim(2);
  // The fused kernel keeps at most 16 entries of a state row per thread (32
  // threads a row: N <= 512, conv_ssd.cu says why); larger states take the
  // four ops, and so do more sequences than there are counters
  // (launch_ssd_step.h).
  if (l.N > 512 || l.B > kStepCounters) return ops::detail::ssd_step_composed(ctx, a);
  if (l.B == 0) return;
  l.z = const_rows_of(a.z);
  l.xbc = const_rows_of(a.xbc);
  l.dt_raw = const_rows_of(a.dt_raw);
  l.conv_weight = a.conv_weight.data<float>();
  l.conv_bias = a.conv_bias.defined() ? a.conv_bias.data<float>() : nullptr;
  l.conv_state = ptr_or_null(a.conv_state);
  l.dt_bias = a.dt_bias.data<float>();
  l.A_log = a.A_log.data<float>();
  l.dt_min = a.dt_min;
  l.dt_max = a.dt_max;
  l.D = a.D.defined() ? a.D.data<float>() : nullptr;
  l.norm_weight = a.norm_weight.defined() ? a.norm_weight.data<float>() : nullptr;
  l.norm_group = a.norm_group > 0 ? a.norm_group : l.H * l.P;
  l.eps = a.eps;
  l.norm_before_gate = a.norm_before_gate;
  l.state = state_or_null(a.state);
  l.out = rows_of(a.out);
  l.gated = a.gated;
  l.counters = resources(ctx).step_counters;
  l.overlap = resources(ctx).overlap_launches;
  // Many sequences: the convolved rows for the two-launch step, from the
  // op's workspace (allocated once per batch, reused by a recorded step).
  if (resources(ctx).stream_state_step && ssd_step_streams(l))
    l.rows = ctx.arena().alloc(DType::kF32, {l.B, ssd_step_row_floats(l)}).data<float>();
  launch_ssd_step(l, stream(ctx));
  check_launch("ssd_step");
}

}  // namespace

void add_ssd_step_kernels(OpTable& t) { t.ssd_step = &ssd_step; }

}  // namespace ssm::cuda
