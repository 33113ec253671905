// The host side of the HF hybrids' backward ops on the GPU
// (hybrid_backward.cu): relu^2 and the GELU product, the Mamba-1 selective
// scan, the routers and the routed experts.
//
// routed_experts_backward follows its forward (hybrid_ops.cpp): the (token,
// slot) pairs sorted by expert on the host (a stable counting sort, so the
// order is fixed), each expert's rows gathered, its projections recomputed
// through this backend's linear and its gradients through linear_backward
// (cuBLAS, deterministic); each pair's dx lands in a row of its own and a
// token's k rows are summed in slot order.
#include <vector>

#include "ops/cuda/expert_order.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_hybrid.h"
#include "ops/cuda/launch_hybrid_backward.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ops/moe_weights.h"
#include "ssm/ops/linear.h"

namespace ssm::cuda {
namespace {

void relu_squared_backward(Context& ctx, const Tensor& x, const Tensor& d) {
  launch_relu_squared_backward(const_rows_of(x), rows_of(d), stream(ctx));
  check_launch("relu_squared_backward");
}

void gelu_product_backward(Context& ctx, const Tensor& gate, const Tensor& t, const Tensor& dgate,
                           const Tensor& d) {
  launch_gelu_product_backward(const_rows_of(gate), const_rows_of(t), rows_of(dgate), rows_of(d),
                               stream(ctx));
  check_launch("gelu_product_backward");
}

// The kernel keeps at most 8 state entries in each of 32 lanes a channel.
constexpr int64_t kMaxSelectiveState = 256;

void selective_scan_backward(Context& ctx, const ops::SelectiveScanBackwardArgs& g) {
  const ops::SelectiveScanArgs& a = g.fwd;
  SelectiveScanBackwardLaunch l;
  l.B = a.x.dim(0);
  l.L = a.x.dim(1);
  l.D = a.x.cols();
  l.N = a.A_log.dim(1);
  if (l.N > kMaxSelectiveState)
    throw Error(cat("op 'selective_scan_backward': backend 'cuda' takes a state size of at most ",
                    kMaxSelectiveState, ", not ", l.N));
  if (l.B * l.L * l.D == 0) return;
  Arena::Scope scope(ctx.arena());
  l.x = const_rows_of(a.x);
  l.dt_raw = const_rows_of(a.dt_raw);
  l.Bm = const_rows_of(a.B);
  l.C = const_rows_of(a.C);
  if (a.z.defined()) {
    l.z = const_rows_of(a.z);
    l.dz = rows_of(g.dz);
  }
  l.dy = const_rows_of(g.dy);
  l.dt_bias = ops::elements_or_null<const float>(a.dt_bias);
  l.A_log = a.A_log.data<float>();
  l.Dskip = ops::elements_or_null<const float>(a.D);
  l.state0 = ops::elements_or_null<const float>(a.state);
  l.dx = rows_of(g.dx);
  l.ddt_raw = rows_of(g.ddt_raw);
  l.dB = rows_of(g.dB);
  l.dC = rows_of(g.dC);
  // Without a bias (or D) in the forward, its gradient is not wanted either.
  l.ddt_bias = a.dt_bias.defined() ? ops::elements_or_null<float>(g.ddt_bias) : nullptr;
  l.dA_log = ops::elements_or_null<float>(g.dA_log);
  l.dD = a.D.defined() ? ops::elements_or_null<float>(g.dD) : nullptr;
  l.scratch = ops::elements<float>(
      ctx.arena().alloc(DType::kF32, {selective_scan_backward_scratch(l.B, l.L, l.D, l.N)}));
  launch_selective_scan_backward(l, stream(ctx));
  check_launch("selective_scan_backward");
}

int router_code(ops::Router r) {
  switch (r) {
    case ops::Router::kTopkSoftmax:
      return 0;
    case ops::Router::kSoftmaxTopk:
      return 1;
    case ops::Router::kSigmoidBiased:
      return 2;
  }
  return 0;
}

void moe_route_backward(Context& ctx, const ops::MoeRouteBackwardArgs& a) {
  if (a.logits.rows() == 0) return;
  // The choice is a host tensor (moe_route's): copied for the kernel, the
  // copy freed only after work queued before it (memory.cpp).
  const Tensor chosen = a.idx.to(ctx.device());
  launch_moe_route_backward(router_code(a.router), a.normalize, a.scale, const_rows_of(a.logits),
                            chosen.data<int64_t>(), a.idx.dim(1), const_rows_of(a.dweights),
                            rows_of(a.dlogits), stream(ctx));
  check_launch("moe_route_backward");
}

// Expert e's projections (stacked or per expert) as the tensors linear takes:
// W1's row blocks (one, or gate and value) and W2.
struct ExpertTensors {
  Tensor w1[2];
  int blocks = 1;
  Tensor w2;
};

ExpertTensors expert_tensors(const ops::RoutedExpertsArgs& a, int64_t e) {
  const bool gated = a.activation == ops::ExpertActivation::kSiluGated;
  const auto i = static_cast<size_t>(e);
  ExpertTensors x;
  if (ops::per_expert_weights(a)) {
    x.blocks = gated ? 2 : 1;
    x.w1[0] = gated ? a.gate[i] : a.up[i];
    if (gated) x.w1[1] = a.up[i];
    x.w2 = a.down[i];
  } else {
    x.w1[0] = a.w1.index(e);  // both blocks as one (2F or F rows)
    x.w2 = a.w2.index(e);
  }
  return x;
}

void routed_experts_backward(Context& ctx, const ops::RoutedExpertsBackwardArgs& g) {
  const ops::RoutedExpertsArgs& a = g.fwd;
  const int64_t T = a.x.rows(), D = a.x.cols(), k = a.idx.dim(1), F = ops::expert_hidden(a);
  const int64_t E = ops::expert_count(a), P = T * k;
  const bool gated = a.activation == ops::ExpertActivation::kSiluGated;
  const int64_t w1_rows = gated ? 2 * F : F;
  if (T == 0) return;
  const bool want = g.dw1.defined() || !g.ddown.empty();
  const ExpertOrder plan = order_pairs_by_expert(a.idx.data<int64_t>(), P, E);
  const std::vector<int64_t>& begin = plan.begin;
  const Tensor order_d = plan.order.to(ctx.device());
  const int64_t* sorted_d = order_d.data<int64_t>();
  Arena::Scope scope(ctx.arena());
  const Tensor xs = ctx.arena().alloc(DType::kF32, {P, D});        // inputs, expert order
  const Tensor hs = ctx.arena().alloc(DType::kF32, {P, w1_rows});  // W1 x, then dh
  const Tensor acts = ctx.arena().alloc(DType::kF32, {P, F});      // act
  const Tensor dacts = ctx.arena().alloc(DType::kF32, {P, F});     // its gradient
  const Tensor ys = ctx.arena().alloc(DType::kF32, {P, D});        // W2 act, then weight dout
  const Tensor dxs = ctx.arena().alloc(DType::kF32, {P, D});       // each pair's dx
  launch_gather_rows(const_rows_of(a.x), sorted_d, k, rows_of(xs), stream(ctx));
  check_launch("routed_experts_backward (gather)");
  // Forward again, per expert: h, act and the expert's output y.
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = begin[e], n = begin[e + 1] - b;
    if (n == 0) continue;
    const ExpertTensors w = expert_tensors(a, e);
    const Tensor xe = xs.rows(b, b + n), he = hs.rows(b, b + n), ae = acts.rows(b, b + n);
    for (int blk = 0; blk < w.blocks; ++blk)
      ops::linear(
          ctx,
          {.x = xe, .W = w.w1[blk], .y = w.blocks == 1 ? he : he.cols(blk * F, (blk + 1) * F)});
    launch_expert_act(const_rows_of(he), F, gated, rows_of(ae), stream(ctx));
    check_launch("routed_experts_backward (activation)");
    ops::linear(ctx, {.x = ae, .W = w.w2, .y = ys.rows(b, b + n)});
  }
  launch_expert_output_dot(const_rows_of(g.dout), const_rows_of(ys), sorted_d + P, k,
                           rows_of(g.dweights), stream(ctx));
  launch_gather_weighted(const_rows_of(g.dout), const_rows_of(a.weights), sorted_d, k, rows_of(ys),
                         stream(ctx));
  check_launch("routed_experts_backward (dweights)");
  // The gradients' layout is the weights': expert_tensors over them.
  ops::RoutedExpertsArgs ga = a;
  ga.w1 = g.dw1, ga.w2 = g.dw2, ga.gate = g.dgate, ga.up = g.dup, ga.down = g.ddown;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = begin[e], n = begin[e + 1] - b;
    if (n == 0) continue;
    const ExpertTensors w = expert_tensors(a, e);
    const ExpertTensors dw = want ? expert_tensors(ga, e) : ExpertTensors{};
    const Tensor he = hs.rows(b, b + n), ae = acts.rows(b, b + n), ge = ys.rows(b, b + n);
    // dact = (weight dout) W2, dW2 += (weight dout)^T act; then dh over h.
    const Tensor dact = dacts.rows(b, b + n);
    ops::linear_backward(ctx, {.x = ae, .W = w.w2, .dy = ge, .dx = dact, .dW = dw.w2});
    launch_expert_act_backward(const_rows_of(he), const_rows_of(dact), F, gated, rows_of(he),
                               stream(ctx));
    check_launch("routed_experts_backward (activation backward)");
    for (int blk = 0; blk < w.blocks; ++blk)
      ops::linear_backward(ctx, {.x = xs.rows(b, b + n),
                                 .W = w.w1[blk],
                                 .dy = w.blocks == 1 ? he : he.cols(blk * F, (blk + 1) * F),
                                 .dx = dxs.rows(b, b + n),
                                 .accumulate_dx = blk > 0,
                                 .dW = dw.w1[blk]});
  }
  // dx[t] (+)= the k pairs' rows in slot order (unit weights).
  launch_moe_combine(const_rows_of(dxs), sorted_d + P, ConstRows{}, k, rows_of(g.dx),
                     g.accumulate_dx, stream(ctx));
  check_launch("routed_experts_backward (combine)");
}

}  // namespace

void add_hybrid_backward_kernels(OpTable& t) {
  t.relu_squared_backward = &relu_squared_backward;
  t.gelu_product_backward = &gelu_product_backward;
  t.selective_scan_backward = &selective_scan_backward;
  t.moe_route_backward = &moe_route_backward;
  t.routed_experts_backward = &routed_experts_backward;
}

}  // namespace ssm::cuda
