// The ops the HF hybrids need beyond Mamba-2 and Mamba-3, on the GPU:
// relu^2, the Mamba-1 selective scan, the mixture of experts and attention
// with a KV cache (attention.cu).
//
// moe_route writes its choice to a host tensor (the experts' grouping is
// planned on the host), so it reads the logits back and runs the cpu
// backend's router on them: T x E values, next to the experts' products.
// routed_experts sorts the (token, slot) pairs by expert on the host like
// the cpu kernel, gathers each expert's tokens into contiguous rows on the
// GPU, runs its projections through this backend's linear (cuBLAS) and sums
// each token's k results in slot order.
#include <algorithm>
#include <vector>

#include "ops/cuda/expert_order.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_hybrid.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/moe_weights.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"

namespace ssm::cuda {
namespace {

void relu_squared(Context& ctx, const Tensor& t) {
  launch_relu_squared(rows_of(t), stream(ctx));
  check_launch("relu_squared");
}

void gelu_product(Context& ctx, const Tensor& gate, const Tensor& t) {
  launch_gelu_product(const_rows_of(gate), rows_of(t), stream(ctx));
  check_launch("gelu_product");
}

void selective_scan(Context& ctx, const ops::SelectiveScanArgs& a) {
  SelectiveScanLaunch l;
  l.B = a.x.dim(0);
  l.L = a.x.dim(1);
  l.D = a.x.cols();
  l.N = a.A_log.dim(1);
  if (l.N > 1024)
    throw Error(
        cat("op 'selective_scan': backend 'cuda' takes a state size of at most 1024, not ", l.N));
  if (l.B * l.L == 0) return;
  l.x = const_rows_of(a.x);
  l.dt_raw = const_rows_of(a.dt_raw);
  l.Bm = const_rows_of(a.B);
  l.C = const_rows_of(a.C);
  if (a.z.defined()) l.z = const_rows_of(a.z);
  l.dt_bias = a.dt_bias.defined() ? a.dt_bias.data<float>() : nullptr;
  l.A_log = a.A_log.data<float>();
  l.Dskip = a.D.defined() ? a.D.data<float>() : nullptr;
  l.y = rows_of(a.y);
  l.state = ptr_or_null(a.state);
  launch_selective_scan(l, stream(ctx));
  check_launch("selective_scan");
}

// A dense copy of t on the host (t may be a strided device view).
Tensor dense_on_host(Context& ctx, const Tensor& t) {
  if (t.is_dense()) return t.to(Device::host());
  const Tensor d = ctx.arena().alloc(t.dtype(), t.shape());
  ops::copy(ctx, d, t);
  return d.to(Device::host());
}

void moe_route(Context& ctx, const ops::MoeRouteArgs& a) {
  if (a.logits.rows() == 0) return;
  Arena::Scope scope(ctx.arena());
  Context host("cpu", 1);
  ops::MoeRouteArgs h = a;
  h.logits = dense_on_host(ctx, a.logits);
  if (a.bias.defined()) h.bias = dense_on_host(ctx, a.bias);
  h.weights = Tensor::empty(DType::kF32, a.weights.shape());
  ops::moe_route(host, h);
  ops::copy(ctx, a.weights, h.weights.to(ctx.device()));
}

void routed_experts(Context& ctx, const ops::RoutedExpertsArgs& a) {
  const int64_t T = a.x.rows(), D = a.x.cols(), k = a.idx.dim(1), F = ops::expert_hidden(a);
  const int64_t E = ops::expert_count(a), P = T * k;
  const bool gated = a.activation == ops::ExpertActivation::kSiluGated;
  const int64_t w1_rows = gated ? 2 * F : F;
  if (T == 0) return;
  const ExpertOrder plan = order_pairs_by_expert(a.idx.data<int64_t>(), P, E);
  const std::vector<int64_t>& begin = plan.begin;
  const Tensor order_d = plan.order.to(ctx.device());
  Arena::Scope scope(ctx.arena());
  const Tensor xs = ctx.arena().alloc(DType::kF32, {P, D});
  const Tensor hs = ctx.arena().alloc(DType::kF32, {P, w1_rows});
  const Tensor ys = ctx.arena().alloc(DType::kF32, {P, D});
  launch_gather_rows(const_rows_of(a.x), order_d.data<int64_t>(), k, rows_of(xs), stream(ctx));
  check_launch("routed_experts (gather)");
  const bool per_expert = ops::per_expert_weights(a);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = begin[e], n = begin[e + 1] - b;
    if (n == 0) continue;
    const Tensor xe = xs.rows(b, b + n), he = hs.rows(b, b + n);
    const auto i = static_cast<size_t>(e);
    if (!per_expert) {
      ops::linear(ctx, {.x = xe, .W = a.w1.index(e), .y = he});
    } else if (gated) {
      ops::linear(ctx, {.x = xe, .W = a.gate[i], .y = he.cols(0, F)});
      ops::linear(ctx, {.x = xe, .W = a.up[i], .y = he.cols(F, 2 * F)});
    } else {
      ops::linear(ctx, {.x = xe, .W = a.up[i], .y = he});
    }
    launch_expert_activation(rows_of(he), F, gated, stream(ctx));
    check_launch("routed_experts (activation)");
    ops::linear(
        ctx,
        {.x = he.cols(0, F), .W = per_expert ? a.down[i] : a.w2.index(e), .y = ys.rows(b, b + n)});
  }
  launch_moe_combine(const_rows_of(ys), order_d.data<int64_t>() + P, const_rows_of(a.weights), k,
                     rows_of(a.out), a.accumulate, stream(ctx));
  check_launch("routed_experts (combine)");
}

bool no_past(const Tensor& past) {
  const int64_t* p = past.data<int64_t>();
  return std::all_of(p, p + past.numel(), [](int64_t n) { return n == 0; });
}

// The launch of both attention ops; past (unless the caller put it on the
// device: past_on_device) and inv_freq copied to the device when they are on
// the host, kept alive by `keep`.
AttentionLaunch attention_launch(Context& ctx, const ops::AttentionArgs& a, Tensor (&keep)[2]) {
  AttentionLaunch l;
  l.B = a.k_cache.dim(0);
  l.L = a.qkv.dim(1);
  l.H = a.heads;
  l.Hkv = a.kv_heads;
  l.capacity = a.k_cache.dim(2);
  l.hd = a.k_cache.dim(3);
  l.qkv = rows_of(a.qkv);
  l.k_cache = ops::elements<float>(a.k_cache);
  l.v_cache = ops::elements<float>(a.v_cache);
  l.scale = a.scale;
  l.split = !resources(ctx).rounds_products();
  if (a.past_on_device.defined()) {
    // A recorded step's positions: nothing copied, and no launch sized by
    // them (the decode kernels' grid depends on the shapes only), so that
    // the recording serves every step until the cache grows (new buffers: a
    // new recording).
    l.past = a.past_on_device.data<int64_t>();
  } else if (a.past.device().is_host() && no_past(a.past)) {
    // A call without a state (training's forward): zeros set on the stream,
    // not a synchronous copy, which would end a recorded training step's
    // capture (the hybrid then never replayed).
    keep[0] = Tensor::empty(DType::kI64, {l.B}, ctx.device());
    check(cudaMemsetAsync(keep[0].raw(), 0, keep[0].nbytes(), stream(ctx)), "attention (no past)");
    l.past = keep[0].data<int64_t>();
  } else {
    keep[0] = a.past.to(ctx.device());
    l.past = keep[0].data<int64_t>();
  }
  if (a.inv_freq.defined()) {
    keep[1] = a.inv_freq.device() == ctx.device() ? a.inv_freq : a.inv_freq.to(ctx.device());
    l.inv_freq = keep[1].data<float>();
    l.half = a.inv_freq.numel();
  }
  if (a.out.defined()) l.out = rows_of(a.out);
  return l;
}

void attention_append_kv(Context& ctx, const ops::AttentionArgs& a) {
  Tensor keep[2];
  const AttentionLaunch l = attention_launch(ctx, a, keep);
  launch_attention_append_kv(l, stream(ctx));
  check_launch("attention_append_kv");
}

void attention(Context& ctx, const ops::AttentionArgs& a) {
  Tensor keep[2];
  const AttentionLaunch l = attention_launch(ctx, a, keep);
  if (!attention_tiled(l) && l.hd > attention_decode_max_head_dim())
    throw Error(cat("op 'attention': backend 'cuda' takes head dims up to ",
                    attention_decode_max_head_dim(), ", not ", l.hd));
  Arena::Scope scope(ctx.arena());  // the partials, free again once both launches are queued
  const int64_t floats = attention_decode_scratch(l);
  float* scratch =
      floats ? ops::elements<float>(ctx.arena().alloc(DType::kF32, {floats})) : nullptr;
  launch_attention(l, scratch, stream(ctx));
  check_launch("attention");
}

}  // namespace

void add_hybrid_kernels(OpTable& t) {
  t.attention_append_kv = &attention_append_kv;
  t.attention = &attention;
  t.relu_squared = &relu_squared;
  t.gelu_product = &gelu_product;
  t.selective_scan = &selective_scan;
  t.moe_route = &moe_route;
  t.routed_experts = &routed_experts;
}

}  // namespace ssm::cuda
