#include "ssm/ops/attention.h"

#include <cmath>

#include "ops/op_check.h"

namespace ssm::ops {
namespace {

void check_forward(const detail::OpCheck& c, const AttentionArgs& a, bool needs_out) {
  c.expect(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0,
           "kv heads must divide the query heads");
  c.expect(a.k_cache.defined() && a.k_cache.ndim() == 4, "k_cache must be (B, H_kv, capacity, hd)");
  const int64_t B = a.k_cache.dim(0), cap = a.k_cache.dim(2), hd = a.k_cache.dim(3);
  c.dense("k_cache", a.k_cache, {B, a.kv_heads, cap, hd}).dense("v_cache", a.v_cache, {B, a.kv_heads, cap, hd});
  c.rows("qkv", a.qkv).expect(a.qkv.ndim() == 3 && a.qkv.dim(0) == B, "qkv must be (B, L, width)");
  const int64_t L = a.qkv.dim(1);
  c.rows("qkv", a.qkv, B * L, (a.heads + 2 * a.kv_heads) * hd);
  if (a.inv_freq.defined()) {
    c.dense("inv_freq", a.inv_freq, {a.inv_freq.numel()});
    c.expect(2 * a.inv_freq.numel() <= hd, "rotary wider than a head");
  }
  c.host("past", a.past, {B}, DType::kI64).optional("past_on_device", a.past_on_device, {B}, DType::kI64);
  const int64_t* past = a.past.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    c.expect(past[b] >= 0 && past[b] + L <= cap, "the KV cache has no room for the new tokens");
  if (needs_out) c.rows("out", a.out, B * L, a.heads * hd);
}

}  // namespace

void attention_append_kv(Context& ctx, const AttentionArgs& a) {
  const detail::OpCheck c(ctx, "attention_append_kv");
  check_forward(c, a, false);
  detail::run(ctx, c.kernel(&OpTable::attention_append_kv), a);
}

void attention(Context& ctx, const AttentionArgs& a) {
  const detail::OpCheck c(ctx, "attention");
  check_forward(c, a, true);
  detail::run(ctx, c.kernel(&OpTable::attention), a);
}

void attention_backward(Context& ctx, const AttentionBackwardArgs& a) {
  const detail::OpCheck c(ctx, "attention_backward");
  c.expect(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0,
           "kv heads must divide the query heads");
  c.expect(a.k.defined() && a.k.ndim() == 4, "k must be (B, H_kv, L, hd)");
  const int64_t B = a.k.dim(0), L = a.k.dim(2), hd = a.k.dim(3);
  c.dense("k", a.k, {B, a.kv_heads, L, hd}).dense("v", a.v, {B, a.kv_heads, L, hd});
  c.rows("q", a.q, B * L, a.heads * hd).rows("out", a.out, B * L, a.heads * hd);
  c.rows("dout", a.dout, B * L, a.heads * hd).rows("dq", a.dq, B * L, a.heads * hd);
  c.rows("dk", a.dk, B * L, a.kv_heads * hd).rows("dv", a.dv, B * L, a.kv_heads * hd);
  detail::run(ctx, c.kernel(&OpTable::attention_backward), a);
}

void rope_backward(Context& ctx, const RopeBackwardArgs& a) {
  const detail::OpCheck c(ctx, "rope_backward");
  c.dense("inv_freq", a.inv_freq, {a.inv_freq.numel()});
  c.expect(2 * a.inv_freq.numel() <= a.head_dim, "rotary wider than a head");
  c.rows("dq", a.dq).expect(a.dq.ndim() == 3, "dq must be (B, L, H hd)");
  const int64_t rows = a.dq.rows();
  c.rows("dq", a.dq, rows, a.heads * a.head_dim).rows("dk", a.dk, rows, a.kv_heads * a.head_dim);
  c.expect(a.dk.ndim() == 3 && a.dk.dim(1) == a.dq.dim(1), "dk must be (B, L, H_kv hd)");
  detail::run(ctx, c.kernel(&OpTable::rope_backward), a);
}

Tensor rotary_inv_freq(int64_t rotary_dim, double base) {
  if (rotary_dim <= 0) return Tensor();
  Tensor t = Tensor::empty(DType::kF32, {rotary_dim / 2});
  for (int64_t i = 0; i < rotary_dim / 2; ++i)
    t.data<float>()[i] = static_cast<float>(
        std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim)));
  return t;
}

}  // namespace ssm::ops
