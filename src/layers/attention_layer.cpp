#include "ssm/layers/attention_layer.h"

#include <algorithm>
#include <cmath>

#include "ssm/ops/attention.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"

namespace ssm {

// What the backward reads: the projections with q and k rotated, the
// caches of the whole sequence and the attention output.
struct AttentionActivations : LayerActivations {
  Tensor qkv, k, v, out;
};

namespace {
constexpr int64_t kMinCapacity = 16;
}  // namespace

void AttentionState::reserve(Context& ctx, int64_t max_len) {
  const int64_t cap = capacity();
  if (max_len <= cap) return;
  const int64_t B = k.dim(0), Hkv = k.dim(1), hd = k.dim(3);
  Tensor nk = Tensor::zeros(DType::kF32, {B, Hkv, max_len, hd}, k.device());
  Tensor nv = Tensor::zeros(DType::kF32, {B, Hkv, max_len, hd}, v.device());
  if (cap > 0) {
    ops::copy(ctx, nk.slice(2, 0, cap), k);
    ops::copy(ctx, nv.slice(2, 0, cap), v);
  }
  k = std::move(nk);
  v = std::move(nv);
}

void AttentionState::ensure_room(Context& ctx, int64_t extra) {
  int64_t need = 0;
  for (int64_t b = 0; b < batch(); ++b) need = std::max(need, length(b) + extra);
  if (need > capacity()) reserve(ctx, std::max({need, 2 * capacity(), kMinCapacity}));
}

void AttentionState::zero(Context&) {
  // The cache rows past each length are never read: emptying is resetting lengths.
  std::fill_n(lengths.data<int64_t>(), lengths.numel(), int64_t{0});
}

AttentionLayer::AttentionLayer(const AttentionConfig& config) : cfg_(config) {
  auto& c = cfg_;
  if (c.num_heads_kv == 0) c.num_heads_kv = c.num_heads;
  if (c.head_dim == 0 && c.num_heads > 0) c.head_dim = c.d_model / c.num_heads;
  SSM_CHECK(c.num_heads > 0 && c.head_dim > 0 && c.num_heads % c.num_heads_kv == 0,
            "invalid attention heads ", c.num_heads, "/", c.num_heads_kv);
  SSM_CHECK(c.rotary_emb_dim % 2 == 0 && c.rotary_emb_dim <= c.head_dim, "invalid rotary_emb_dim");
  const int64_t width = c.head_dim * (c.num_heads + 2 * c.num_heads_kv);
  const char* out_name = c.split_projections ? "o_proj" : "out_proj";
  const char* names[3] = {"q_proj", "k_proj", "v_proj"};
  const int64_t widths[3] = {c.head_dim * c.num_heads, c.head_dim * c.num_heads_kv,
                             c.head_dim * c.num_heads_kv};
  if (c.split_projections) {
    for (int i = 0; i < 3; ++i) {
      add_param(cat(names[i], ".weight"), {widths[i], c.d_model});
      if (c.qkv_proj_bias) add_param(cat(names[i], ".bias"), {widths[i]}, ParamRole::kNoDecay);
    }
  } else {
    add_param("in_proj.weight", {width, c.d_model});
    if (c.qkv_proj_bias) add_param("in_proj.bias", {width}, ParamRole::kNoDecay);
  }
  add_param(cat(out_name, ".weight"), {c.d_model, c.num_heads * c.head_dim});
  if (c.out_proj_bias) add_param(cat(out_name, ".bias"), {c.d_model}, ParamRole::kNoDecay);
  // params_ no longer grows, so pointers into it stay valid.
  if (c.split_projections) {
    for (int i = 0; i < 3; ++i) {
      qkv_w_[i] = &param(cat(names[i], ".weight"));
      qkv_b_[i] = c.qkv_proj_bias ? &param(cat(names[i], ".bias")) : nullptr;
    }
  } else {
    in_proj_ = &param("in_proj.weight");
    in_bias_ = c.qkv_proj_bias ? &param("in_proj.bias") : nullptr;
  }
  out_proj_ = &param(cat(out_name, ".weight"));
  out_bias_ = c.out_proj_bias ? &param(cat(out_name, ".bias")) : nullptr;
  inv_freq_ = ops::rotary_inv_freq(c.rotary_emb_dim, c.rotary_emb_base);
  scale_ = static_cast<float>(c.softmax_scale > 0 ? c.softmax_scale
                                                  : 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
}

std::unique_ptr<LayerState> AttentionLayer::make_state(int64_t batch, Device device) const {
  auto s = std::make_unique<AttentionState>();
  s->k = Tensor::zeros(DType::kF32, {batch, cfg_.num_heads_kv, 0, cfg_.head_dim}, device);
  s->v = Tensor::zeros(DType::kF32, {batch, cfg_.num_heads_kv, 0, cfg_.head_dim}, device);
  s->lengths = Tensor::zeros(DType::kI64, {batch});
  return s;
}

const Tensor& AttentionLayer::inv_freq(Context& ctx) {
  if (!inv_freq_.defined() || inv_freq_.device() == ctx.device()) return inv_freq_;
  if (!inv_freq_on_device_.defined() || inv_freq_on_device_.device() != ctx.device())
    inv_freq_on_device_ = inv_freq_.to(ctx.device());
  return inv_freq_on_device_;
}

void AttentionLayer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                             std::unique_ptr<LayerActivations>* keep) {
  SSM_CHECK(x.ndim() == 3 && x.dim(2) == cfg_.d_model, "attention input must be (B, L, ",
            cfg_.d_model, "), got ", x.shape());
  const auto& c = cfg_;
  const int64_t B = x.dim(0), L = x.dim(1), H = c.num_heads, Hkv = c.num_heads_kv, hd = c.head_dim;
  Arena::Scope scope(ctx.arena());
  const Workspace work(ctx, keep != nullptr);

  AttentionState fresh;  // without a state: a cache of this call's tokens only
  AttentionState* st = AttentionState::for_call(state, fresh, ctx, B, L, Hkv, hd, work);

  // [q | k | v] = u in_proj^T + bias
  const Tensor qkv = work({B, L, hd * (H + 2 * Hkv)});
  project_qkv(x, qkv, ctx);
  if (c.key_multiplier != 1.f) ops::scale(ctx, qkv.cols(H * hd, (H + Hkv) * hd), c.key_multiplier);
  const ops::AttentionArgs args{.heads = H, .kv_heads = Hkv, .qkv = qkv, .inv_freq = inv_freq(ctx),
                                .k_cache = st->k, .v_cache = st->v, .past = st->lengths,
                                .past_on_device = st->lengths_on_device,
                                .scale = scale_, .out = work({B, L, H * hd})};
  ops::attention_append_kv(ctx, args);
  ops::attention(ctx, args);
  if (st != &fresh) {
    for (int64_t b = 0; b < B; ++b) st->lengths.data<int64_t>()[b] += L;
    st->lengths_on_device = Tensor();  // stale now
  }

  ops::linear(ctx, {.x = args.out, .W = value(out_proj_), .bias = value(out_bias_), .y = y});
  if (keep) {
    auto a = std::make_unique<AttentionActivations>();
    a->qkv = qkv, a->k = fresh.k, a->v = fresh.v, a->out = args.out;
    *keep = std::move(a);
  }
}

void AttentionLayer::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy,
                              Tensor& dx, std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const AttentionActivations&>(kept);
  const auto& c = cfg_;
  const int64_t H = c.num_heads, Hkv = c.num_heads_kv, hd = c.head_dim;
  Arena::Scope scope(ctx.arena());

  const Tensor dout = ctx.arena().alloc(DType::kF32, a.out.shape());
  ops::linear_backward(ctx, {.x = a.out, .W = value(out_proj_), .dy = dy, .dx = dout,
                             .dW = grad(grads, out_proj_), .dbias = grad(grads, out_bias_)});

  const Tensor dqkv = ctx.arena().alloc(DType::kF32, a.qkv.shape());
  const Tensor dq = dqkv.cols(0, H * hd), dk = dqkv.cols(H * hd, (H + Hkv) * hd);
  ops::attention_backward(ctx, {.heads = H, .kv_heads = Hkv, .q = a.qkv.cols(0, H * hd),
                                .k = a.k, .v = a.v, .out = a.out, .dout = dout, .scale = scale_,
                                .dq = dq, .dk = dk, .dv = dqkv.cols((H + Hkv) * hd, (H + 2 * Hkv) * hd)});
  if (inv_freq_.defined())
    ops::rope_backward(ctx, {.heads = H, .kv_heads = Hkv, .head_dim = hd,
                             .inv_freq = inv_freq(ctx), .dq = dq, .dk = dk});
  // Falcon-H1: k was times key_multiplier before the (linear) rotary.
  if (c.key_multiplier != 1.f) ops::scale(ctx, dk, c.key_multiplier);

  project_qkv_backward(x, dqkv, dx, grads, ctx);
}

void AttentionLayer::project_qkv(const Tensor& x, const Tensor& qkv, Context& ctx) {
  if (!cfg_.split_projections) {
    ops::linear(ctx, {.x = x, .W = value(in_proj_), .bias = value(in_bias_), .y = qkv});
    return;
  }
  // Each projection writes its own column block of qkv: no concatenation.
  int64_t col = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t w = qkv_w_[i]->shape[0];
    ops::linear(ctx, {.x = x, .W = value(qkv_w_[i]), .bias = value(qkv_b_[i]), .y = qkv.cols(col, col + w)});
    col += w;
  }
}

void AttentionLayer::project_qkv_backward(const Tensor& x, const Tensor& dqkv, Tensor& dx,
                                          std::vector<Tensor>& grads, Context& ctx) {
  if (!cfg_.split_projections) {
    ops::linear_backward(ctx, {.x = x, .W = value(in_proj_), .dy = dqkv, .dx = dx,
                               .dW = grad(grads, in_proj_), .dbias = grad(grads, in_bias_)});
    return;
  }
  int64_t col = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t w = qkv_w_[i]->shape[0];
    ops::linear_backward(ctx, {.x = x, .W = value(qkv_w_[i]), .dy = dqkv.cols(col, col + w), .dx = dx,
                               .accumulate_dx = i > 0, .dW = grad(grads, qkv_w_[i]),
                               .dbias = grad(grads, qkv_b_[i])});
    col += w;
  }
}

}  // namespace ssm
