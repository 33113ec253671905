// Causal grouped-query attention read straight off SPEC §5: one query at a
// time, its scores, softmax and weighted sum of values in double; the
// backward by the formulas of ops/attention.h, one query row at a time.
#include "ops/ref/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

// Row s of kv head h of sequence b in a (B, H_kv, S, hd) tensor.
template <typename T>
T* kv_row(const Tensor& cache, int64_t b, int64_t h, int64_t s) {
  return ops::elements<T>(cache) + ((b * cache.dim(1) + h) * cache.dim(2) + s) * cache.dim(3);
}

template <typename T>
double dot(const T* x, const T* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return s;
}

// Rotates the rotary pairs (i, i + half) of `heads` heads of width hd at v by
// the angles sign * pos * inv_freq[i] (sign -1 undoes the rotation).
template <typename T>
void rotate_heads(T* v, int64_t heads, int64_t hd, const Tensor& inv_freq, double pos,
                  double sign) {
  if (!inv_freq.defined()) return;
  const int64_t half = inv_freq.numel();
  const T* freq = inv_freq.data<T>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos * static_cast<double>(freq[i]);
      double pair[2] = {static_cast<double>(v[h * hd + i]),
                        static_cast<double>(v[h * hd + i + half])};
      ops::rotate_pair(pair, 0, 1, std::cos(angle), sign * std::sin(angle));
      v[h * hd + i] = static_cast<T>(pair[0]);
      v[h * hd + i + half] = static_cast<T>(pair[1]);
    }
}

// p[s] = softmax over s < n of scale q . K_s, with K_s = row s of kv head
// (b, j) in k.
template <typename T>
void softmax_scores(const T* q, const Tensor& k, int64_t b, int64_t j, int64_t n, double scale,
                    double* p) {
  const int64_t hd = k.dim(3);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s < n; ++s) {
    p[s] = scale * dot(q, kv_row<T>(k, b, j, s), hd);
    mx = std::max(mx, p[s]);
  }
  double sum = 0;
  for (int64_t s = 0; s < n; ++s) sum += p[s] = std::exp(p[s] - mx);
  for (int64_t s = 0; s < n; ++s) p[s] /= sum;
}

}  // namespace

template <typename T>
void attention_append_kv(Context&, const ops::AttentionArgs& a) {
  const int64_t B = a.k_cache.dim(0), L = a.qkv.dim(1), hd = a.k_cache.dim(3);
  const int64_t H = a.heads, Hkv = a.kv_heads;
  const int64_t* past = a.past.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) {
      const int64_t pos = past[b] + t;
      T* q = ops::row<T>(a.qkv, b * L + t);
      T* k = q + H * hd;
      const T* v = k + Hkv * hd;
      rotate_heads(q, H, hd, a.inv_freq, static_cast<double>(pos), 1.0);
      rotate_heads(k, Hkv, hd, a.inv_freq, static_cast<double>(pos), 1.0);
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t e = 0; e < hd; ++e) {
          kv_row<T>(a.k_cache, b, h, pos)[e] = k[h * hd + e];
          kv_row<T>(a.v_cache, b, h, pos)[e] = v[h * hd + e];
        }
    }
}

template <typename T>
void attention(Context& ctx, const ops::AttentionArgs& a) {
  const int64_t B = a.k_cache.dim(0), L = a.qkv.dim(1), hd = a.k_cache.dim(3);
  const int64_t H = a.heads, group = a.heads / a.kv_heads;
  const int64_t* past = a.past.data<int64_t>();
  int64_t keys = 0;
  for (int64_t b = 0; b < B; ++b) keys = std::max(keys, past[b] + L);
  double* p = ctx.arena().alloc(DType::kF64, {keys}).template data<double>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L; ++t) {
        const int64_t j = h / group, n = past[b] + t + 1;
        softmax_scores(ops::row<T>(a.qkv, b * L + t) + h * hd, a.k_cache, b, j, n, a.scale, p);
        T* o = ops::row<T>(a.out, b * L + t) + h * hd;
        for (int64_t e = 0; e < hd; ++e) {
          double s = 0;
          for (int64_t key = 0; key < n; ++key) s += p[key] * kv_row<T>(a.v_cache, b, j, key)[e];
          o[e] = static_cast<T>(s);
        }
      }
}

template <typename T>
void attention_backward(Context& ctx, const ops::AttentionBackwardArgs& a) {
  const int64_t B = a.k.dim(0), L = a.k.dim(2), hd = a.k.dim(3);
  const int64_t H = a.heads, Hkv = a.kv_heads, group = a.heads / a.kv_heads;
  Arena& arena = ctx.arena();
  double* p = arena.alloc(DType::kF64, {L}).template data<double>();
  double* ds = arena.alloc(DType::kF64, {L}).template data<double>();
  // dK and dV gather over every query of the group: summed in double here.
  double* dk = arena.zeros(DType::kF64, {B, Hkv, L, hd}).template data<double>();
  double* dv = arena.zeros(DType::kF64, {B, Hkv, L, hd}).template data<double>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L; ++t) {
        const int64_t j = h / group, n = t + 1, r = b * L + t;
        const T* q = ops::row<T>(a.q, r) + h * hd;
        const T* o = ops::row<T>(a.out, r) + h * hd;
        const T* dout = ops::row<T>(a.dout, r) + h * hd;
        softmax_scores(q, a.k, b, j, n, a.scale, p);
        const double delta = dot(dout, o, hd);  // rowsum(dO o O)
        for (int64_t s = 0; s < n; ++s)
          ds[s] = p[s] * (dot(dout, kv_row<T>(a.v, b, j, s), hd) - delta);
        T* dq = ops::row<T>(a.dq, r) + h * hd;
        for (int64_t e = 0; e < hd; ++e) {
          double acc = 0;
          for (int64_t s = 0; s < n; ++s) acc += ds[s] * kv_row<T>(a.k, b, j, s)[e];
          dq[e] = static_cast<T>(a.scale * acc);
        }
        for (int64_t s = 0; s < n; ++s)
          for (int64_t e = 0; e < hd; ++e) {
            const int64_t at = ((b * Hkv + j) * L + s) * hd + e;
            dk[at] += a.scale * ds[s] * static_cast<double>(q[e]);
            dv[at] += p[s] * static_cast<double>(dout[e]);
          }
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < L; ++s)
      for (int64_t j = 0; j < Hkv; ++j)
        for (int64_t e = 0; e < hd; ++e) {
          const int64_t at = ((b * Hkv + j) * L + s) * hd + e;
          ops::row<T>(a.dk, b * L + s)[j * hd + e] = static_cast<T>(dk[at]);
          ops::row<T>(a.dv, b * L + s)[j * hd + e] = static_cast<T>(dv[at]);
        }
}

template <typename T>
void rope_backward(Context&, const ops::RopeBackwardArgs& a) {
  const int64_t L = a.dq.dim(1), hd = a.head_dim;
  for (int64_t r = 0; r < a.dq.rows(); ++r) {
    // A rotation's gradient goes back through the opposite rotation.
    const double pos = static_cast<double>(r % L);
    rotate_heads(ops::row<T>(a.dq, r), a.heads, hd, a.inv_freq, pos, -1.0);
    rotate_heads(ops::row<T>(a.dk, r), a.kv_heads, hd, a.inv_freq, pos, -1.0);
  }
}

#define SSM_REF_ATTENTION(T)                                                        \
  template void attention_append_kv<T>(Context&, const ops::AttentionArgs&);        \
  template void attention<T>(Context&, const ops::AttentionArgs&);                  \
  template void attention_backward<T>(Context&, const ops::AttentionBackwardArgs&); \
  template void rope_backward<T>(Context&, const ops::RopeBackwardArgs&);
SSM_REF_ATTENTION(float)
SSM_REF_ATTENTION(double)
#undef SSM_REF_ATTENTION

void add_attention_kernels(OpTable& t) {
  t.attention_append_kv = &attention_append_kv<float>;
  t.attention = &attention<float>;
  t.attention_backward = &attention_backward<float>;
  t.rope_backward = &rope_backward<float>;
}

}  // namespace ssm::ref
