// Backward of the attention mixer (SPEC §5): the forward is recomputed from
// the layer input u with the forward's ops (in_proj, rotary, caches of the
// whole sequence, causal GQA softmax), then reversed:
//   out_proj -> attention -> rotary -> in_proj.
#include <cmath>

#include "ssm/layers/attention_layer.h"
#include "ssm/ops/attention.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/rotary.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/attention_backward.h"
#include "ssm/train/ops/linear_backward.h"
#include "ssm/train/ops/rotary_backward.h"

namespace ssm {

void backward_attention(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                        std::vector<Tensor>& grads, Context& ctx) {
  auto* attn = dynamic_cast<AttentionLayer*>(&layer);
  SSM_CHECK(attn, "backward_attention called on a ", layer.kind(), " layer");
  const AttentionConfig& c = attn->config();
  // The forward op is causal whatever the config says; so is this backward.
  ThreadPool& pool = ctx.pool();
  const int64_t B = x.dim(0), L = x.dim(1), rows = B * L, D = c.d_model;
  const int64_t H = c.num_heads, Hkv = c.num_heads_kv, hd = c.head_dim;
  const int64_t width = hd * (H + 2 * Hkv);
  const float* u = x.data<float>();
  const float* in_w = layer.param("in_proj.weight").value.data<float>();
  const float* in_b = c.qkv_proj_bias ? layer.param("in_proj.bias").value.data<float>() : nullptr;
  auto grad = [&](const char* name, bool present = true) {
    return present ? detail::grad_of(layer, grads, name) : nullptr;
  };

  // ---- forward recomputation ----
  Tensor qkv = Tensor::empty(DType::kF32, {rows, width});
  ops::linear(u, rows, D, in_w, width, in_b, qkv.data<float>(), pool);
  std::vector<float> inv_freq(c.rotary_emb_dim / 2);
  ops::rope_inv_freq(c.rotary_emb_dim, c.rotary_emb_base, inv_freq.data());
  Tensor k_cache = Tensor::empty(DType::kF32, {B, Hkv, L, hd});
  Tensor v_cache = Tensor::empty(DType::kF32, {B, Hkv, L, hd});
  Tensor out = Tensor::empty(DType::kF32, {rows, H * hd});
  Tensor scratch = Tensor::empty(DType::kF32, {ops::attention_scratch_floats(B, L, H, L)});
  const std::vector<int64_t> past(B, 0);
  const double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(hd));
  const ops::AttentionArgs args{
      .batch = B, .length = L, .heads = H, .kv_heads = Hkv, .head_dim = hd,
      .qkv = qkv.data<float>(), .ld_qkv = width, .rotary_dim = c.rotary_emb_dim,
      .inv_freq = inv_freq.data(), .k_cache = k_cache.data<float>(),
      .v_cache = v_cache.data<float>(), .capacity = L, .past = past.data(),
      .scale = static_cast<float>(scale),
      .out = out.data<float>(), .ld_out = H * hd, .scratch = scratch.data<float>()};
  ops::attention_append_kv(args, pool);
  ops::attention(args, pool);
  scratch = Tensor();

  // ---- backward ----
  Tensor dout = Tensor::empty(DType::kF32, {rows, H * hd});
  ops::linear_backward({.M = rows, .K = H * hd, .N = D, .x = out.data<float>(),
                        .W = layer.param("out_proj.weight").value.data<float>(),
                        .dy = dy.data<float>(), .dx = dout.data<float>(),
                        .dW = grad("out_proj.weight"),
                        .dbias = grad("out_proj.bias", c.out_proj_bias)},
                       pool);

  Tensor dqkv_t = Tensor::empty(DType::kF32, {rows, width});
  float* dqkv = dqkv_t.data<float>();
  ops::attention_backward({.batch = B, .length = L, .heads = H, .kv_heads = Hkv, .head_dim = hd,
                           .q = qkv.data<float>(), .ld_q = width, .k = k_cache.data<float>(),
                           .v = v_cache.data<float>(), .out = out.data<float>(),
                           .dout = dout.data<float>(), .ld_out = H * hd, .scale = args.scale,
                           .dq = dqkv, .ld_dq = width, .dk = dqkv + H * hd,
                           .dv = dqkv + (H + Hkv) * hd, .ld_dkv = width},
                          pool);
  ops::rope_backward(dqkv, width, B, L, H, Hkv, hd, c.rotary_emb_dim, inv_freq.data(), pool);

  ops::linear_backward({.M = rows, .K = D, .N = width, .x = u, .W = in_w, .dy = dqkv,
                        .dx = dx.data<float>(), .dW = grad("in_proj.weight"),
                        .dbias = grad("in_proj.bias", c.qkv_proj_bias)},
                       pool);
}

}  // namespace ssm
