// The Mamba-3 forward ops on the GPU (mamba3_prepare.cu, mamba3_scan.cu,
// and the decode step's fused prepare and scan, mamba3_step.cu):
// the sizes the kernels keep in registers or shared memory checked here,
// then the launchers. The backward ops come with training on the GPU.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_chunk_scan.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/mamba3_launch_inputs.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void mamba3_prepare(Context& ctx, const ops::Mamba3PrepareArgs& a) {
  if (a.ang.cols() > 1024)
    throw Error(cat("op 'mamba3_prepare': backend 'cuda' takes at most 1024 rotary angles, not ", a.ang.cols()));
  if (a.x.dim(0) * a.x.dim(1) == 0) return;
  Arena::Scope scope(ctx.arena());
  Mamba3PrepareLaunch l = mamba3_prepare_launch(ctx, a);
  // A decode step's kernels start while the one before finishes.
  l.overlap = l.L == 1 && resources(ctx).overlap_launches;
  launch_mamba3_prepare(l, stream(ctx));
  check_launch("mamba3_prepare");
}

void mamba3_scan(Context& ctx, const ops::Mamba3ScanArgs& a) {
  Mamba3ScanLaunch l;
  static_cast<Mamba3ScanInputs&>(l) = mamba3_scan_inputs(a);
  if (l.N > 1024) throw Error(cat("op 'mamba3_scan': backend 'cuda' takes a state size of at most 1024, not ", l.N));
  if (mamba3_scan_step_bytes(l.R, l.N) > 48 * 1024)
    throw Error(cat("op 'mamba3_scan': backend 'cuda' takes rank x state size of at most ~6000, not ", l.R, " x ",
                    l.N));
  if (l.B * l.H * l.L == 0) return;
  l.o = ops::elements<float>(a.o);
  if (a.ssm.defined()) {
    l.ssm = state_or_null(a.ssm);
    l.k_prev = ops::elements<float>(a.k_prev);
    l.v_prev = ops::elements<float>(a.v_prev);
  }
  // A decode step (L = 1) runs the recurrence; longer sequences the chunked
  // form on the tensor cores (chunk_scan.cu), when its tiles fit.
  if (l.L == 1 || !chunk_scan_fits(l.R, l.N, l.P)) {
    l.overlap = l.L == 1 && resources(ctx).overlap_launches;
    l.stream_state = resources(ctx).stream_state_step;
    launch_mamba3_scan(l, stream(ctx));
    check_launch("mamba3_scan");
    return;
  }
  const int64_t RN = l.R * l.N, RP = l.R * l.P;
  ChunkScanLaunch c;
  c.B = l.B, c.H = l.H, c.L = l.L, c.R = l.R, c.N = l.N, c.P = l.P;
  c.q = {l.q, l.H * l.L * RN, l.L * RN, RN, l.N, 1};
  c.k = {l.k, l.H * l.L * RN, l.L * RN, RN, l.N, 1};
  c.v = {l.v, l.H * l.L * RP, l.L * RP, RP, l.P, 1};
  c.o = {l.o, l.H * l.L * RP, l.L * RP, RP, l.P};
  c.D = l.D;
  c.state = l.ssm;
  c.k_prev = l.k_prev;
  c.v_prev = l.v_prev;
  Arena::Scope scope(ctx.arena());
  const int64_t chunks = chunk_scan_chunks(l.L, l.R);
  auto scratch = [&](Shape shape) { return ops::elements<float>(ctx.arena().alloc(DType::kF32, shape)); };
  float *la = scratch({l.B, l.H, l.L}), *w = scratch({l.B, l.H, l.L}), *wd = scratch({l.B, l.H, l.L});
  float* pend = l.ssm ? scratch({l.B, l.H}) : nullptr;
  c.la = la, c.w = w, c.wd = wd, c.pend = pend;
  c.chunk_states = scratch({l.B, l.H, chunks, l.P, l.N});
  c.chunk_decay = scratch({l.B, l.H, chunks});
  launch_chunk_prepare_mamba3(l.dt, l.A, l.lam, l.B, l.H, l.L, la, w, wd, pend, stream(ctx));
  c.split = !resources(ctx).rounds_products();
  c.forced_heads = resources(ctx).scan_heads;
  launch_chunk_scan(c, stream(ctx));
  launch_mamba3_last_step(l, stream(ctx));
  check_launch("mamba3_scan");
}

// A decode step (L = 1) in one kernel (mamba3_step.cu) where its block
// fits; otherwise, for prefill and with SSM_CUDA_M3_STEP=0, the two ops.
void mamba3_prepare_scan(Context& ctx, const ops::Mamba3PrepareScanArgs& a) {
  const ops::Mamba3PrepareArgs& p = a.prepare;
  Mamba3PrepareLaunch l;
  static_cast<Mamba3PrepareInputs&>(l) = mamba3_prepare_inputs(p);
  Mamba3ScanLaunch s;
  static_cast<Mamba3ScanInputs&>(s) = mamba3_scan_inputs(a.scan);
  s.o = ops::elements<float>(a.scan.o);
  if (a.scan.ssm.defined()) {
    s.ssm = state_or_null(a.scan.ssm);
    s.k_prev = ops::elements<float>(a.scan.k_prev);
    s.v_prev = ops::elements<float>(a.scan.v_prev);
  }
  s.stream_state = resources(ctx).stream_state_step;
  // Many sequences take the two ops where the scan streams its state
  // (mamba3_scan_step.cu: four 256-thread blocks a multiprocessor, where
  // the fused step's 512-thread blocks of 120 registers fit one), and so
  // does MIMO: its R products a row and step in a block a head made the
  // 130m R = 4 model slower on an H100 (834 against 936 tokens/s at batch
  // 1, 2,960 against 3,880 at 8; docs/CUDA.md).
  if (l.L != 1 || l.R != 1 || !resources(ctx).fused_mamba3_step || l.S > 1024 ||
      !mamba3_step_fits(l.R, l.N, l.P, l.S) || mamba3_scan_streams_wide(s)) {
    // Qualified: ops::'s of the same names are found by their arguments.
    cuda::mamba3_prepare(ctx, p);
    cuda::mamba3_scan(ctx, a.scan);
    return;
  }
  if (l.B * l.H == 0) return;
  set_prepare_outputs(l, p);
  // Its kernel starts while the one before finishes (in_proj).
  l.overlap = resources(ctx).overlap_launches;
  launch_mamba3_step(l, s, stream(ctx));
  check_launch("mamba3_prepare_scan");
}

void mamba3_output(Context& ctx, const ops::Mamba3OutputArgs& a) {
  Mamba3OutputLaunch l;
  static_cast<Mamba3OutputInputs&>(l) = mamba3_output_inputs(a);
  if (l.R > kMamba3MaxRank)
    throw Error(cat("op 'mamba3_output': backend 'cuda' takes a MIMO rank of at most ", kMamba3MaxRank, ", not ", l.R));
  if (l.B * l.L * l.H == 0) return;
  l.y = rows_of(a.y);
  l.overlap = l.L == 1 && resources(ctx).overlap_launches;
  launch_mamba3_output(l, stream(ctx));
  check_launch("mamba3_output");
}

}  // namespace

void add_mamba3_kernels(OpTable& t) {
  t.mamba3_prepare = &mamba3_prepare;
  t.mamba3_scan = &mamba3_scan;
  t.mamba3_prepare_scan = &mamba3_prepare_scan;
  t.mamba3_output = &mamba3_output;
}

}  // namespace ssm::cuda
