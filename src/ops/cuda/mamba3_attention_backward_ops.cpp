// The host side of the Mamba-3 and attention backward ops on the GPU
// (mamba3_*_backward.cu, attention_backward.cu): sizes checked, scratch from
// the context's arena, the launchers of launch_mamba3_attention_backward.h.
// Parameter gradients are summed from per-row contributions (scratch) in a
// fixed order by launch_sum_rows.
#include <cstddef>
#include <utility>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_mamba3_attention_backward.h"
#include "ops/cuda/mamba3_launch_inputs.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

// A dense F32 scratch of `rows` x `cols` when `wanted`, else null.
float* scratch_if(Context& ctx, bool wanted, int64_t rows, int64_t cols) {
  if (!wanted) return nullptr;
  return ops::elements<float>(ctx.arena().alloc(DType::kF32, {rows, cols}));
}

// grad += the column sums of the rows x cols contributions c (when both are there).
void add_rows(Context& ctx, const float* c, int64_t rows, int64_t cols, const Tensor& grad) {
  if (!c || !grad.defined()) return;
  float* partial = ops::elements<float>(ctx.arena().alloc(DType::kF32, {kPartialRows, cols}));
  launch_sum_rows(ConstRows{c, rows, cols, cols}, partial, ops::elements<float>(grad), stream(ctx));
}

void mamba3_output_backward(Context& ctx, const ops::Mamba3OutputBackwardArgs& g) {
  const ops::Mamba3OutputArgs& a = g.fwd;
  Mamba3OutputBackwardLaunch l;
  static_cast<Mamba3OutputInputs&>(l) = mamba3_output_inputs(a);
  if (l.B * l.L * l.H == 0) return;
  Arena::Scope scope(ctx.arena());
  const int64_t rows = l.B * l.L, HRP = l.H * l.R * l.P, HP = l.H * l.P;
  l.dy = const_rows_of(g.dy);
  l.d_o = ops::elements<float>(g.d_o);
  l.dz = rows_of(g.dz);
  l.cz = scratch_if(ctx, a.mimo_z.defined() && g.dmimo_z.defined(), rows, HRP);
  l.co = scratch_if(ctx, a.mimo_o.defined() && g.dmimo_o.defined(), rows, HRP);
  l.cn = scratch_if(ctx, a.norm.defined() && g.dnorm.defined(), rows, HP);
  launch_mamba3_output_backward(l, stream(ctx));
  add_rows(ctx, l.cz, rows, HRP, g.dmimo_z);
  add_rows(ctx, l.co, rows, HRP, g.dmimo_o);
  add_rows(ctx, l.cn, rows, HP, g.dnorm);
  check_launch("mamba3_output_backward");
}

void mamba3_scan_backward(Context& ctx, const ops::Mamba3ScanBackwardArgs& g) {
  const ops::Mamba3ScanArgs& a = g.fwd;
  Mamba3ScanBackwardLaunch l;
  static_cast<Mamba3ScanInputs&>(l) = mamba3_scan_inputs(a);
  if (l.B * l.H * l.L == 0) return;
  Arena::Scope scope(ctx.arena());
  if (a.ssm.defined()) {
    l.ssm = a.ssm.data<float>();
    l.k_prev = a.k_prev.data<float>();
    l.v_prev = a.v_prev.data<float>();
  }
  l.d_o = g.d_o.data<float>();
  l.dq = ops::elements<float>(g.dq);
  l.dk = ops::elements<float>(g.dk);
  l.dv = ops::elements<float>(g.dv);
  l.ddt = ops::elements<float>(g.ddt);
  l.dA = ops::elements<float>(g.dA);
  l.dlam = ops::elements<float>(g.dlam);
  l.dD = g.dD.defined() && a.D.defined() ? ops::elements<float>(g.dD) : nullptr;
  l.split = !resources(ctx).rounds_products();
  l.T = mamba3_backward_steps(l.R, l.P, l.N, l.split);
  l.scratch = ops::elements<float>(
      ctx.arena().alloc(DType::kF32, {mamba3_scan_backward_scratch(l.B, l.H, l.L, l.P, l.N, l.T)}));
  launch_mamba3_scan_backward(l, stream(ctx));
  check_launch("mamba3_scan_backward");
}

void mamba3_prepare_backward(Context& ctx, const ops::Mamba3PrepareBackwardArgs& g) {
  const ops::Mamba3PrepareArgs& a = g.fwd;
  Mamba3PrepareBackwardLaunch l;
  static_cast<Mamba3PrepareInputs&>(l) = mamba3_prepare_inputs(a);
  if (l.B * l.L == 0) return;
  Arena::Scope scope(ctx.arena());
  l.q = a.q.data<float>();
  l.k = a.k.data<float>();
  l.phases = l.S > 0 ? a.phases.data<float>() : nullptr;
  l.dq = ops::elements<float>(g.dq);
  l.dk = ops::elements<float>(g.dk);
  l.dv = g.dv.data<float>();
  l.d_dt = g.ddt.data<float>();
  l.dA = g.dA.data<float>();
  l.dlam = g.dlam.data<float>();
  l.dx = rows_of(g.dx);
  l.dB = rows_of(g.dB);
  l.dC = rows_of(g.dC);
  l.dddt = rows_of(g.dddt);
  l.dddA = rows_of(g.dddA);
  l.dtrap = rows_of(g.dtrap);
  l.dang = rows_of(g.dang);
  const int64_t rows = l.B * l.L, HRN = l.H * l.R * l.N, HRP = l.H * l.R * l.P;
  if (l.S > 0)
    l.dphase = ops::elements<float>(ctx.arena().alloc(DType::kF32, {l.B * l.H * l.L, l.S}));
  const int64_t norm_rows = rows * l.R * l.G;
  l.cBn = scratch_if(ctx, g.dB_norm.defined(), norm_rows, l.N);
  l.cCn = scratch_if(ctx, g.dC_norm.defined(), norm_rows, l.N);
  // The biases' gradients are dk's and dq's sums over (b, t), read in place
  // below (their copy into rows first, bias_kernel, took 49 us a launch at
  // 1 x 2048 SISO on an H100).
  l.cmx = scratch_if(ctx, a.mimo_x.defined() && g.dmimo_x.defined(), rows, HRP);
  launch_mamba3_prepare_backward(l, stream(ctx));
  // ddt_bias[h] += the column sums of dddt (written above).
  if (g.ddt_bias.defined()) {
    float* partial = ops::elements<float>(ctx.arena().alloc(DType::kF32, {kPartialRows, l.H}));
    launch_sum_rows(const_rows_of(g.dddt), partial, ops::elements<float>(g.ddt_bias), stream(ctx));
  }
  add_rows(ctx, l.cBn, norm_rows, l.N, g.dB_norm);
  add_rows(ctx, l.cCn, norm_rows, l.N, g.dC_norm);
  for (const auto& [src, grad] : {std::pair{l.dk, g.dB_bias}, std::pair{l.dq, g.dC_bias}}) {
    if (!grad.defined()) continue;
    float* partial = ops::elements<float>(ctx.arena().alloc(DType::kF32, {kPartialRows, HRN}));
    launch_sum_head_rows(src, l.B, l.L, l.H, l.R * l.N, partial, ops::elements<float>(grad),
                         stream(ctx));
  }
  add_rows(ctx, l.cmx, rows, HRP, g.dmimo_x);
  check_launch("mamba3_prepare_backward");
}

void attention_backward(Context& ctx, const ops::AttentionBackwardArgs& a) {
  AttentionBackwardLaunch l;
  l.B = a.k.dim(0);
  l.Hkv = a.kv_heads;
  l.L = a.k.dim(2);
  l.hd = a.k.dim(3);
  l.H = a.heads;
  // Heads wider than the flash kernels' 128: the plain kernels keep one
  // query's scores (and a key's P and dS over the queries) in shared memory.
  if (l.hd > 128 && (2 * l.L + 2 * l.hd) * static_cast<int64_t>(sizeof(float)) > 200 * 1024)
    throw Error(cat(
        "op 'attention_backward': backend 'cuda' takes sequences of at most ~25000 tokens, not ",
        l.L));
  if (l.B * l.L * l.H == 0) return;
  Arena::Scope scope(ctx.arena());
  l.scale = a.scale;
  l.split = !resources(ctx).rounds_products();
  l.q = const_rows_of(a.q);
  l.out = const_rows_of(a.out);
  l.dout = const_rows_of(a.dout);
  l.k = a.k.data<float>();
  l.v = a.v.data<float>();
  l.dq = rows_of(a.dq);
  l.dk = rows_of(a.dk);
  l.dv = rows_of(a.dv);
  l.stats = ops::elements<float>(ctx.arena().alloc(DType::kF32, {3, l.B * l.H * l.L}));
  launch_attention_backward(l, stream(ctx));
  check_launch("attention_backward");
}

void rope_backward(Context& ctx, const ops::RopeBackwardArgs& a) {
  if (!a.inv_freq.defined() || a.inv_freq.numel() == 0 || a.dq.rows() == 0) return;
  // The inverse frequencies may come from the host (ops::rotary_inv_freq); a
  // copy freed here is reused only by work queued after this kernel (memory.cpp).
  const Tensor freq =
      a.inv_freq.device() == ctx.device() ? a.inv_freq : a.inv_freq.to(ctx.device());
  launch_rope_backward(rows_of(a.dq), rows_of(a.dk), a.dq.dim(1), a.heads, a.kv_heads, a.head_dim,
                       freq.data<float>(), a.inv_freq.numel(), stream(ctx));
  check_launch("rope_backward");
}

}  // namespace

void add_mamba3_attention_backward_kernels(OpTable& t) {
  t.mamba3_output_backward = &mamba3_output_backward;
  t.mamba3_scan_backward = &mamba3_scan_backward;
  t.mamba3_prepare_backward = &mamba3_prepare_backward;
  t.attention_backward = &attention_backward;
  t.rope_backward = &rope_backward;
}

}  // namespace ssm::cuda
