#include "ssm/layers/shared_attention_block.h"

#include <cmath>

#include "ssm/ops/activation.h"
#include "ssm/ops/attention.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/rms_norm.h"

namespace ssm {

// What a use's forward keeps: the normed input, [q | k | v] rotated, the
// caches, the attention output, o_proj's output (before the norm) and its
// norm, gate_up's output before the product, the product and down's output.
struct SharedBlockActivations : LayerActivations {
  Tensor n, qkv, k, v, attn, o, hn, gu, gated, t;
};

namespace {
const char* const kQkvNames[3] = {"q", "k", "v"};

// Columns of q, k and v in the [q | k | v] buffer.
int64_t qkv_width(const AttentionConfig& a, int i) {
  return a.head_dim * (i == 0 ? a.num_heads : a.num_heads_kv);
}
}  // namespace

SharedAttentionBlock::SharedAttentionBlock(const SharedBlockConfig& config) : cfg_(config) {
  const AttentionConfig& a = cfg_.attention;
  const int64_t D = cfg_.d_model, F = cfg_.mlp_hidden;
  SSM_CHECK(a.d_model == 2 * D, "the shared block reads [h | embeddings], 2 * d_model channels");
  SSM_CHECK(
      a.num_heads > 0 && a.head_dim > 0 && a.num_heads_kv > 0 && a.num_heads % a.num_heads_kv == 0,
      "invalid shared attention heads ", a.num_heads, "/", a.num_heads_kv);
  auto add = [&](std::string name, Shape shape, ParamRole role = ParamRole::kWeight) {
    params_.push_back(Param{std::move(name), std::move(shape), role, Tensor()});
  };
  add("input_layernorm.weight", {2 * D}, ParamRole::kNoDecay);
  for (int i = 0; i < 3; ++i)
    add(cat("self_attn.", kQkvNames[i], "_proj.weight"), {qkv_width(a, i), 2 * D});
  add("self_attn.o_proj.weight", {D, a.num_heads * a.head_dim});
  add("pre_ff_layernorm.weight", {D}, ParamRole::kNoDecay);
  add("feed_forward.gate_up_proj.weight", {2 * F, D});
  add("feed_forward.down_proj.weight", {D, F});
  // params_ no longer grows, so pointers into it stay valid.
  in_norm = &params_[0];
  for (int i = 0; i < 3; ++i) qkv[i] = &params_[1 + i];
  o_proj = &params_[4];
  ff_norm = &params_[5];
  gate_up = &params_[6];
  down = &params_[7];
  inv_freq_ = ops::rotary_inv_freq(a.rotary_emb_dim, a.rotary_emb_base);
}

const Tensor& SharedAttentionBlock::inv_freq(Context& ctx) {
  if (!inv_freq_.defined() || inv_freq_.device() == ctx.device()) return inv_freq_;
  if (!inv_freq_on_device_.defined() || inv_freq_on_device_.device() != ctx.device())
    inv_freq_on_device_ = inv_freq_.to(ctx.device());
  return inv_freq_on_device_;
}

SharedBlockUse::SharedBlockUse(SharedAttentionBlock& block, int64_t use)
    : block_(block), use_(use) {
  const SharedBlockConfig& c = block.config();
  const int64_t D = c.d_model, r = c.adapter_rank;
  // HF's names, relative to the layer: the adapters sit in the shared
  // block's lists at this use's index.
  if (c.attention_adapters) {
    for (int i = 0; i < 3; ++i) {
      const std::string base =
          cat("shared_transformer.self_attn.linear_", kQkvNames[i], "_adapter_list.", use, ".");
      add_param(base + "0.weight", {r, 2 * D});
      add_param(base + "1.weight", {qkv_width(c.attention, i), r});
    }
  }
  const std::string mlp =
      cat("shared_transformer.feed_forward.gate_up_proj_adapter_list.", use, ".");
  add_param(mlp + "0.weight", {r, D});
  add_param(mlp + "1.weight", {2 * c.mlp_hidden, r});
  add_param("linear.weight", {D, D});
  size_t k = 0;
  if (c.attention_adapters)
    for (int i = 0; i < 3; ++i) {
      qkv_a_[i] = &params_[k++];
      qkv_b_[i] = &params_[k++];
    }
  mlp_a_ = &params_[k++];
  mlp_b_ = &params_[k++];
  linear_ = &params_[k++];
}

std::unique_ptr<LayerState> SharedBlockUse::make_state(int64_t batch, Device device) const {
  const AttentionConfig& a = block_.config().attention;
  auto s = std::make_unique<AttentionState>();
  s->k = Tensor::zeros(DType::kF32, {batch, a.num_heads_kv, 0, a.head_dim}, device);
  s->v = Tensor::zeros(DType::kF32, {batch, a.num_heads_kv, 0, a.head_dim}, device);
  s->lengths = Tensor::zeros(DType::kI64, {batch});
  return s;
}

void SharedBlockUse::project(const Tensor& x, const Param* W, const Param* A, const Param* B,
                             const Tensor& y, Context& ctx) const {
  ops::linear(ctx, {.x = x, .W = W->value, .y = y});
  if (!A) return;
  Arena::Scope scope(ctx.arena());
  Shape low = x.shape();
  low.back() = A->shape[0];
  const Tensor t = ctx.arena().alloc(DType::kF32, low);
  ops::linear(ctx, {.x = x, .W = A->value, .y = t});
  ops::linear(ctx, {.x = t, .W = B->value, .y = y, .accumulate = true});
}

void SharedBlockUse::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                             std::unique_ptr<LayerActivations>* keep) {
  const SharedBlockConfig& c = block_.config();
  const AttentionConfig& a = c.attention;
  const int64_t B = x.dim(0), L = x.dim(1), D = c.d_model, F = c.mlp_hidden;
  const int64_t H = a.num_heads, Hkv = a.num_heads_kv, hd = a.head_dim;
  SSM_CHECK(x.ndim() == 3 && x.dim(2) == 2 * D, "shared block input must be (B, L, ", 2 * D,
            "), got ", x.shape());
  Arena::Scope scope(ctx.arena());
  const Workspace alloc(ctx, keep != nullptr);

  AttentionState fresh;  // without a state: a cache of this call's tokens only
  AttentionState* st = AttentionState::for_call(state, fresh, ctx, B, L, Hkv, hd, alloc);

  const Tensor n = alloc({B, L, 2 * D});
  ops::rms_norm(ctx, {.x = x, .w = block_.in_norm->value, .eps = c.norm_eps, .out = n});
  const Tensor qkv = alloc({B, L, hd * (H + 2 * Hkv)});
  int64_t col = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t w = qkv_width(a, i);
    project(n, block_.qkv[i], qkv_a_[i], qkv_b_[i], qkv.cols(col, col + w), ctx);
    col += w;
  }
  const float scale = static_cast<float>(
      a.softmax_scale > 0 ? a.softmax_scale : 1.0 / std::sqrt(static_cast<double>(hd)));
  const ops::AttentionArgs args{.heads = H,
                                .kv_heads = Hkv,
                                .qkv = qkv,
                                .inv_freq = block_.inv_freq(ctx),
                                .k_cache = st->k,
                                .v_cache = st->v,
                                .past = st->lengths,
                                .scale = scale,
                                .out = alloc({B, L, H * hd})};
  ops::attention_append_kv(ctx, args);
  ops::attention(ctx, args);
  if (st != &fresh)
    for (int64_t b = 0; b < B; ++b) st->lengths.data<int64_t>()[b] += L;

  const Tensor h = alloc({B, L, D});
  ops::linear(ctx, {.x = args.out, .W = block_.o_proj->value, .y = h});
  // Training keeps o_proj's output, the norm's input; inferring normalises in place.
  const Tensor hn = keep ? alloc({B, L, D}) : h;
  ops::rms_norm(ctx, {.x = h, .w = block_.ff_norm->value, .eps = c.norm_eps, .out = hn});
  const Tensor gu = alloc({B, L, 2 * F});
  project(hn, block_.gate_up, mlp_a_, mlp_b_, gu, ctx);
  const Tensor gated = keep ? alloc({B, L, F}) : gu.cols(F, 2 * F);
  if (keep) ops::copy(ctx, gated, gu.cols(F, 2 * F));
  ops::gelu_product(ctx, gu.cols(0, F), gated);
  const Tensor t = keep ? alloc({B, L, D}) : h;
  ops::linear(ctx, {.x = gated, .W = block_.down->value, .y = t});
  ops::linear(ctx, {.x = t, .W = linear_->value, .y = y});
  if (keep) {
    auto k = std::make_unique<SharedBlockActivations>();
    k->n = n, k->qkv = qkv, k->k = fresh.k, k->v = fresh.v, k->attn = args.out, k->o = h, k->hn = hn;
    k->gu = gu, k->gated = gated, k->t = t;
    *keep = std::move(k);
  }
}

Tensor SharedBlockUse::grad_of(std::vector<Tensor>& grads, const Param* p) const {
  if (!p) return Tensor();
  std::vector<Param>& shared = block_.parameters();
  for (size_t j = 0; j < shared.size(); ++j) {
    if (&shared[j] != p) continue;
    const size_t i = params_.size() + j;
    SSM_CHECK(i < grads.size(), "shared_attention: the shared block's gradients are missing");
    return grads[i].defined() && grads[i].numel() ? grads[i] : Tensor();
  }
  return grad(grads, p);
}

void SharedBlockUse::project_backward(const Tensor& x, const Param* W, const Param* A, const Param* B,
                                      const Tensor& dy, const Tensor& dx, bool accumulate_dx,
                                      std::vector<Tensor>& grads, Context& ctx) const {
  ops::linear_backward(ctx, {.x = x, .W = W->value, .dy = dy, .dx = dx, .accumulate_dx = accumulate_dx,
                             .dW = grad_of(grads, W)});
  if (!A) return;
  Arena::Scope scope(ctx.arena());
  Shape low = x.shape();
  low.back() = A->shape[0];
  const Tensor t = ctx.arena().alloc(DType::kF32, low), dt = ctx.arena().alloc(DType::kF32, low);
  ops::linear(ctx, {.x = x, .W = A->value, .y = t});
  ops::linear_backward(ctx, {.x = t, .W = B->value, .dy = dy, .dx = dt, .dW = grad_of(grads, B)});
  ops::linear_backward(ctx, {.x = x, .W = A->value, .dy = dt, .dx = dx, .accumulate_dx = true,
                             .dW = grad_of(grads, A)});
}

void SharedBlockUse::backward(const LayerActivations& kept, const Tensor& x, const Tensor& dy, Tensor& dx,
                              std::vector<Tensor>& grads, Context& ctx) {
  const auto& a = dynamic_cast<const SharedBlockActivations&>(kept);
  const SharedBlockConfig& c = block_.config();
  const AttentionConfig& at = c.attention;
  const int64_t B = x.dim(0), L = x.dim(1), D = c.d_model, F = c.mlp_hidden;
  const int64_t H = at.num_heads, Hkv = at.num_heads_kv, hd = at.head_dim;
  Arena::Scope scope(ctx.arena());
  auto alloc = [&](Shape s) { return ctx.arena().alloc(DType::kF32, s); };

  const Tensor dt = alloc({B, L, D}), dgu = alloc({B, L, 2 * F}), dhn = alloc({B, L, D});
  ops::linear_backward(ctx, {.x = a.t, .W = linear_->value, .dy = dy, .dx = dt, .dW = grad_of(grads, linear_)});
  ops::linear_backward(ctx, {.x = a.gated, .W = block_.down->value, .dy = dt, .dx = dgu.cols(F, 2 * F),
                             .dW = grad_of(grads, block_.down)});
  // gate_up's value half before the product: gu's (kept intact when training).
  ops::gelu_product_backward(ctx, a.gu.cols(0, F), a.gu.cols(F, 2 * F), dgu.cols(0, F), dgu.cols(F, 2 * F));
  project_backward(a.hn, block_.gate_up, mlp_a_, mlp_b_, dgu, dhn, false, grads, ctx);
  const Tensor dox = alloc({B, L, D});
  ops::rms_norm_backward(ctx, {.x = a.o, .w = block_.ff_norm->value, .eps = c.norm_eps, .dout = dhn,
                               .dx = dox, .dw = grad_of(grads, block_.ff_norm)});
  const Tensor dattn = alloc({B, L, H * hd});
  ops::linear_backward(ctx, {.x = a.attn, .W = block_.o_proj->value, .dy = dox, .dx = dattn,
                             .dW = grad_of(grads, block_.o_proj)});
  const Tensor dqkv = alloc({B, L, hd * (H + 2 * Hkv)});
  const Tensor dq = dqkv.cols(0, H * hd), dk = dqkv.cols(H * hd, (H + Hkv) * hd);
  const float scale = static_cast<float>(
      at.softmax_scale > 0 ? at.softmax_scale : 1.0 / std::sqrt(static_cast<double>(hd)));
  ops::attention_backward(ctx, {.heads = H, .kv_heads = Hkv, .q = a.qkv.cols(0, H * hd), .k = a.k, .v = a.v,
                                .out = a.attn, .dout = dattn, .scale = scale, .dq = dq, .dk = dk,
                                .dv = dqkv.cols((H + Hkv) * hd, (H + 2 * Hkv) * hd)});
  if (block_.inv_freq(ctx).defined())
    ops::rope_backward(ctx, {.heads = H, .kv_heads = Hkv, .head_dim = hd, .inv_freq = block_.inv_freq(ctx),
                             .dq = dq, .dk = dk});
  const Tensor dn = alloc({B, L, 2 * D});
  int64_t col = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t w = qkv_width(at, i);
    project_backward(a.n, block_.qkv[i], qkv_a_[i], qkv_b_[i], dqkv.cols(col, col + w), dn, i > 0, grads, ctx);
    col += w;
  }
  ops::rms_norm_backward(ctx, {.x = x, .w = block_.in_norm->value, .eps = c.norm_eps, .dout = dn, .dx = dx,
                               .dw = grad_of(grads, block_.in_norm)});
}

}  // namespace ssm
