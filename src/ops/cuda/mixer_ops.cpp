// The norms, the embedding lookup, the convolution and the SSD ops on the
// GPU: argument checks that only this backend needs (sizes its kernels keep
// in registers), then the launchers.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_chunk_scan.h"
#include "ops/cuda/launch_hybrid.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void rms_norm(Context& ctx, const ops::RmsNormArgs& a) {
  // No weight: the weightless norm (FalconMamba's dt, B, C).
  launch_rms_norm(const_rows_of(a.x), a.w.defined() ? a.w.data<float>() : nullptr, a.eps, rows_of(a.out),
                  stream(ctx), resources(ctx).overlap_launches);
  check_launch("rms_norm");
}

void gated_rms_norm(Context& ctx, const ops::GatedRmsNormArgs& a) {
  launch_gated_rms_norm(const_rows_of(a.y), const_rows_of(a.z), a.w.defined() ? a.w.data<float>() : nullptr,
                        a.group, a.eps, a.norm_before_gate, rows_of(a.out), stream(ctx),
                        resources(ctx).overlap_launches);
  check_launch("gated_rms_norm");
}

void embedding(Context& ctx, const ops::EmbeddingArgs& a) {
  const bool i64 = a.ids.dtype() == DType::kI64;
  switch (a.table.dtype()) {
    case DType::kF32:
      launch_embedding(a.ids.raw(), i64, a.table.data<float>(), rows_of(a.out), a.scale, stream(ctx));
      break;
    case DType::kBF16:
    case DType::kF16:
      launch_embedding16(a.ids.raw(), i64, a.table.raw(), a.table.dtype() == DType::kBF16, rows_of(a.out), a.scale,
                         stream(ctx));
      break;
    default:
      throw Error(cat("op 'embedding': backend 'cuda' has no kernel for ", dtype_name(a.table.dtype()),
                      " tables (F32, BF16 and F16 are supported)"));
  }
  check_launch("embedding");
}

void conv1d(Context& ctx, const ops::Conv1dArgs& a) {
  const int64_t K = a.weight.dim(2);
  if (K - 1 > 16)
    throw Error(cat("op 'conv1d': backend 'cuda' takes kernels of at most 17 taps, not ", K));
  Conv1dLaunch l{const_rows_of(a.in), a.weight.data<float>(), a.bias.defined() ? a.bias.data<float>() : nullptr,
                 ptr_or_null(a.state), rows_of(a.out), a.in.dim(0), a.in.dim(1), a.in.dim(2), K, a.silu};
  launch_conv1d(l, stream(ctx));
  check_launch("conv1d");
}

void ssd_prepare(Context& ctx, const ops::SsdPrepareArgs& a) {
  launch_ssd_prepare(const_rows_of(a.dt_raw), a.dt_bias.data<float>(), a.A_log.data<float>(), a.dt_min, a.dt_max,
                     rows_of(a.dt), ops::elements<float>(a.A), stream(ctx));
  check_launch("ssd_prepare");
}

void ssd_scan(Context& ctx, const ops::SsdScanArgs& a) {
  SsdScanLaunch l;
  l.B = a.x.dim(0);
  l.L = a.x.dim(1);
  l.H = a.A.dim(0);
  l.P = a.x.cols() / l.H;
  l.G = a.groups;
  l.N = a.B.cols() / l.G;
  // Each state row is split over at most 32 threads of 32 entries (conv_ssd.cu).
  if (l.N > 1024) throw Error(cat("op 'ssd_scan': backend 'cuda' takes a state size of at most 1024, not ", l.N));
  if (l.B * l.L == 0) return;
  l.x = const_rows_of(a.x);
  l.Bm = const_rows_of(a.B);
  l.C = const_rows_of(a.C);
  l.dt = const_rows_of(a.dt);
  l.A = a.A.data<float>();
  l.D = a.D.defined() ? a.D.data<float>() : nullptr;
  l.y = rows_of(a.y);
  l.state = state_or_null(a.state);
  // A decode step (L = 1) runs the recurrence; longer sequences the chunked
  // form on the tensor cores (chunk_scan.cu), when its tiles fit.
  if (l.L == 1 || !chunk_scan_fits(1, l.N, l.P)) {
    launch_ssd_scan(l, stream(ctx));
    check_launch("ssd_scan");
    return;
  }
  ChunkScanLaunch c;
  c.B = l.B, c.H = l.H, c.L = l.L, c.R = 1, c.N = l.N, c.P = l.P;
  c.q = {l.C.p, l.L * l.C.stride, l.N, l.C.stride, 0, l.H / l.G};
  c.k = {l.Bm.p, l.L * l.Bm.stride, l.N, l.Bm.stride, 0, l.H / l.G};
  c.v = {l.x.p, l.L * l.x.stride, l.P, l.x.stride, 0, 1};
  c.o = {l.y.p, l.L * l.y.stride, l.P, l.y.stride, 0};
  c.D = l.D;
  c.state = l.state;
  Arena::Scope scope(ctx.arena());
  const int64_t chunks = chunk_scan_chunks(l.L, 1);
  auto scratch = [&](Shape shape) { return ops::elements<float>(ctx.arena().alloc(DType::kF32, shape)); };
  float *la = scratch({l.B, l.H, l.L}), *w = scratch({l.B, l.H, l.L}), *wd = scratch({l.B, l.H, l.L});
  c.la = la, c.w = w, c.wd = wd;
  c.split = !resources(ctx).rounds_products();
  c.forced_heads = resources(ctx).scan_heads;
  c.chunk_states = scratch({l.B, l.H, chunks, l.P, l.N});
  c.chunk_decay = scratch({l.B, l.H, chunks});
  launch_chunk_prepare_ssd(l.dt, l.A, l.B, l.L, la, w, wd, stream(ctx));
  launch_chunk_scan(c, stream(ctx));
  check_launch("ssd_scan");
}

}  // namespace

void add_mixer_kernels(OpTable& t) {
  t.rms_norm = &rms_norm;
  t.gated_rms_norm = &gated_rms_norm;
  t.embedding = &embedding;
  t.conv1d = &conv1d;
  t.ssd_prepare = &ssd_prepare;
  t.ssd_scan = &ssd_scan;
}

}  // namespace ssm::cuda
