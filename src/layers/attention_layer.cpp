#include "ssm/layers/attention_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ssm/ops/attention.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/rotary.h"

namespace ssm {
namespace {

float* scratch(Tensor& t, int64_t n) {
  if (!t.defined() || t.numel() < n) t = Tensor::empty(DType::kF32, {n});
  return t.data<float>();
}

const float* data_of(const Param* p) { return p ? p->value.data<float>() : nullptr; }

constexpr int64_t kMinCapacity = 16;

}  // namespace

void AttentionState::reserve(int64_t max_len) {
  const int64_t cap = capacity();
  if (max_len <= cap) return;
  const int64_t B = k.dim(0), Hkv = k.dim(1), hd = k.dim(3);
  Tensor nk = Tensor::zeros(DType::kF32, {B, Hkv, max_len, hd});
  Tensor nv = Tensor::zeros(DType::kF32, {B, Hkv, max_len, hd});
  for (int64_t i = 0; i < B * Hkv; ++i) {
    const int64_t n = cap * hd;
    if (n == 0) continue;
    std::memcpy(nk.data<float>() + i * max_len * hd, k.data<float>() + i * n, n * sizeof(float));
    std::memcpy(nv.data<float>() + i * max_len * hd, v.data<float>() + i * n, n * sizeof(float));
  }
  k = std::move(nk);
  v = std::move(nv);
}

void AttentionState::ensure_room(int64_t extra) {
  int64_t need = 0;
  for (int64_t b = 0; b < batch(); ++b) need = std::max(need, length(b) + extra);
  if (need > capacity()) reserve(std::max({need, 2 * capacity(), kMinCapacity}));
}

AttentionLayer::AttentionLayer(const AttentionConfig& config) : cfg_(config) {
  auto& c = cfg_;
  if (c.num_heads_kv == 0) c.num_heads_kv = c.num_heads;
  if (c.head_dim == 0 && c.num_heads > 0) c.head_dim = c.d_model / c.num_heads;
  SSM_CHECK(c.num_heads > 0 && c.head_dim > 0 && c.num_heads % c.num_heads_kv == 0,
            "invalid attention heads ", c.num_heads, "/", c.num_heads_kv);
  SSM_CHECK(c.rotary_emb_dim % 2 == 0 && c.rotary_emb_dim <= c.head_dim, "invalid rotary_emb_dim");
  const int64_t width = c.head_dim * (c.num_heads + 2 * c.num_heads_kv);
  add_param("in_proj.weight", {width, c.d_model});
  if (c.qkv_proj_bias) add_param("in_proj.bias", {width}, ParamRole::kNoDecay);
  add_param("out_proj.weight", {c.d_model, c.num_heads * c.head_dim});
  if (c.out_proj_bias) add_param("out_proj.bias", {c.d_model}, ParamRole::kNoDecay);
  in_proj_ = &param("in_proj.weight");
  in_bias_ = c.qkv_proj_bias ? &param("in_proj.bias") : nullptr;
  out_proj_ = &param("out_proj.weight");
  out_bias_ = c.out_proj_bias ? &param("out_proj.bias") : nullptr;
  inv_freq_.resize(c.rotary_emb_dim / 2);
  ops::rope_inv_freq(c.rotary_emb_dim, c.rotary_emb_base, inv_freq_.data());
}

std::unique_ptr<LayerState> AttentionLayer::make_state(int64_t batch) const {
  auto s = std::make_unique<AttentionState>();
  s->k = Tensor::zeros(DType::kF32, {batch, cfg_.num_heads_kv, 0, cfg_.head_dim});
  s->v = Tensor::zeros(DType::kF32, {batch, cfg_.num_heads_kv, 0, cfg_.head_dim});
  s->lengths = Tensor::zeros(DType::kI64, {batch});
  return s;
}

void AttentionLayer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) {
  SSM_CHECK(x.ndim() == 3 && x.dim(2) == cfg_.d_model, "attention input must be (B, L, ",
            cfg_.d_model, "), got ", shape_str(x.shape()));
  std::unique_ptr<LayerState> fresh;
  if (!state) {
    fresh = make_state(x.dim(0));
    state = fresh.get();
  }
  run(x.data<float>(), x.dim(0), x.dim(1), y.data<float>(), static_cast<AttentionState&>(*state),
      ctx);
}

void AttentionLayer::step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) {
  SSM_CHECK(x.ndim() == 2 && x.dim(1) == cfg_.d_model, "attention step input must be (B, ",
            cfg_.d_model, "), got ", shape_str(x.shape()));
  run(x.data<float>(), x.dim(0), 1, y.data<float>(), static_cast<AttentionState&>(state), ctx);
}

void AttentionLayer::run(const float* x, int64_t B, int64_t L, float* y, AttentionState& st,
                         Context& ctx) {
  const auto& c = cfg_;
  const int64_t rows = B * L, H = c.num_heads, hd = c.head_dim;
  const int64_t width = hd * (H + 2 * c.num_heads_kv);
  SSM_CHECK(st.batch() == B, "state holds ", st.batch(), " sequences, input has ", B);
  ThreadPool& pool = ctx.pool();
  st.ensure_room(L);

  // [q | k | v] = u @ in_proj^T + bias
  float* qkv = scratch(qkv_, rows * width);
  ops::linear(x, rows, c.d_model, data_of(in_proj_), width, data_of(in_bias_), qkv, pool);

  const int64_t cap = st.capacity();
  const double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(hd));
  // clang-format off
  ops::AttentionArgs attn{
      .batch = B, .length = L, .heads = H, .kv_heads = c.num_heads_kv, .head_dim = hd,
      .qkv = qkv, .ld_qkv = width, .rotary_dim = c.rotary_emb_dim, .inv_freq = inv_freq_.data(),
      .k_cache = st.k.data<float>(), .v_cache = st.v.data<float>(), .capacity = cap,
      .past = st.lengths.data<int64_t>(), .scale = static_cast<float>(scale),
      .out = scratch(attn_, rows * H * hd), .ld_out = H * hd,
      // Sized by capacity, which grows geometrically, so decoding rarely regrows it.
      .scratch = scratch(scratch_, ops::attention_scratch_floats(B, L, H, cap))};
  // clang-format on
  ops::attention_append_kv(attn, pool);
  ops::attention(attn, pool);
  for (int64_t b = 0; b < B; ++b) st.lengths.data<int64_t>()[b] += L;

  ops::linear(attn.out, rows, H * hd, data_of(out_proj_), c.d_model, data_of(out_bias_), y, pool);
}

}  // namespace ssm
