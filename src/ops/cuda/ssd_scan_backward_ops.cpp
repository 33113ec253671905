// The host side of the SSD scan's backward on the GPU: its scratch from the
// context's arena, then the passes of ssd_scan_backward.cu. Apart from
// train_ops.cpp so that the CPU emulator (scripts/cuda-emulate) can build it
// without cuBLAS.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void ssd_scan_backward(Context& ctx, const ops::SsdScanBackwardArgs& a) {
  const ops::SsdScanArgs& f = a.fwd;
  SsdScanBackwardLaunch l;
  l.B = f.x.dim(0);
  l.L = f.x.dim(1);
  l.H = f.A.dim(0);
  l.P = f.x.cols() / l.H;
  l.G = f.groups;
  l.N = f.B.cols() / l.G;
  if (l.B * l.L == 0) return;
  l.split = !resources(ctx).rounds_products();
  l.f16 = resources(ctx).ssd_backward_f16;
  l.Q = ssd_backward_chunk(l.P, l.N, l.split);
  Arena::Scope scope(ctx.arena());
  const int64_t nc = (l.L + l.Q - 1) / l.Q, PN = l.P * l.N;
  float* scratch = ops::elements<float>(
      ctx.arena().alloc(DType::kF32, {ssd_backward_scratch(l.B, l.L, l.H, l.P, l.N, l.Q)}));
  l.states = scratch;
  l.dstates = l.states + l.B * l.H * nc * PN;
  l.decay = l.dstates + l.B * l.H * nc * PN;
  l.dBh = l.decay + l.B * l.H * nc;
  l.dCh = l.dBh + l.B * l.L * l.H * l.N;
  l.g = l.dCh + l.B * l.L * l.H * l.N;
  l.sums = l.g + l.B * l.L * l.H;
  if (!l.split && l.Q == 64 && ssd_backward_tiles_fit(l.P, l.N))  // the tiles' C B^T
    l.cb = ops::elements<float>(
        ctx.arena().alloc(DType::kF32, {ssd_backward_cb_floats(l.B, l.L, l.G)}));
  l.x = const_rows_of(f.x);
  l.Bm = const_rows_of(f.B);
  l.C = const_rows_of(f.C);
  l.dt = const_rows_of(f.dt);
  l.dy = const_rows_of(a.dy);
  l.A = f.A.data<float>();
  l.D = f.D.defined() ? f.D.data<float>() : nullptr;
  l.state0 = f.state.defined() ? f.state.data<float>() : nullptr;
  l.dx = rows_of(a.dx);
  l.dB = rows_of(a.dB);
  l.dC = rows_of(a.dC);
  l.ddt = rows_of(a.ddt);
  l.dA = ops::elements<float>(a.dA);
  l.dD = ops::elements_or_null<float>(a.dD);
  launch_ssd_scan_backward(l, stream(ctx));
  check_launch("ssd_scan_backward");
}

}  // namespace

void add_ssd_scan_backward_kernels(OpTable& t) { t.ssd_scan_backward = &ssd_scan_backward; }

}  // namespace ssm::cuda
