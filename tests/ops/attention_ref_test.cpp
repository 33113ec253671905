// The reference attention checked on its own, in float64: its forward
// against SPEC §5 written out again here (rotary as complex multiplication,
// attention as a softmax over each query's visible keys, the cache read as
// the earlier tokens of a longer sequence), and its backwards against
// centred differences of its forwards over every coordinate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>

#include "attention_test_support.h"
#include "op_test_support.h"
#include "ops/ref/attention.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::to_f64;

// Rotates the first 2 half channels of the head at x to position pos.
void rotate_complex(double* x, int64_t half, const double* inv_freq, double pos) {
  for (int64_t i = 0; i < half; ++i) {
    const std::complex<double> z =
        std::complex<double>(x[i], x[i + half]) * std::polar(1.0, pos * inv_freq[i]);
    x[i] = z.real();
    x[i + half] = z.imag();
  }
}

TEST(AttentionRef, ForwardMatchesSpecWrittenOut) {
  const int64_t B = 2, L = 4, H = 4, Hkv = 2, hd = 6, rot = 4, half = rot / 2, cap = 11;
  const std::vector<int64_t> past = {3, 6};
  const int64_t width = (H + 2 * Hkv) * hd;
  const double scale = 0.4375;  // exact in float, as AttentionArgs holds it
  const Tensor qkv0 = to_f64(testing::random_tensor({B, L, width}, 1));
  const Tensor kc0 = to_f64(testing::random_tensor({B, Hkv, cap, hd}, 2));
  const Tensor vc0 = to_f64(testing::random_tensor({B, Hkv, cap, hd}, 3));
  const Tensor inv_freq = testing::rope_inv_freq(rot, DType::kF64);
  const double* freq = inv_freq.data<double>();

  // Each sequence's keys and values over positions 0..past+L-1: the cache
  // below past, then the new tokens (keys rotated to their positions).
  Tensor q = qkv0.clone();
  Tensor keys = Tensor::zeros(DType::kF64, {B, Hkv, cap, hd}), values = keys.clone();
  Tensor out = Tensor::zeros(DType::kF64, {B, L, H * hd});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < Hkv; ++j)
      for (int64_t s = 0; s < past[b] + L; ++s)
        for (int64_t e = 0; e < hd; ++e) {
          const bool cached = s < past[b];
          const double* row = qkv0.data<double>() + (b * L + (s - past[b])) * width;
          const int64_t at = ((b * Hkv + j) * cap + s) * hd + e;
          keys.data<double>()[at] = cached ? kc0.data<double>()[at] : row[(H + j) * hd + e];
          values.data<double>()[at] = cached ? vc0.data<double>()[at] : row[(H + Hkv + j) * hd + e];
        }
    for (int64_t j = 0; j < Hkv; ++j)
      for (int64_t t = 0; t < L; ++t)
        rotate_complex(keys.data<double>() + ((b * Hkv + j) * cap + past[b] + t) * hd, half, freq,
                       static_cast<double>(past[b] + t));
    for (int64_t t = 0; t < L; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double* qh = q.data<double>() + (b * L + t) * width + h * hd;
        rotate_complex(qh, half, freq, static_cast<double>(past[b] + t));
        const int64_t j = h / (H / Hkv), n = past[b] + t + 1;
        std::vector<double> w(n);
        double total = 0;
        for (int64_t s = 0; s < n; ++s) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e)
            d += qh[e] * keys.data<double>()[((b * Hkv + j) * cap + s) * hd + e];
          total += w[s] = std::exp(scale * d);  // small scores: no shift needed
        }
        for (int64_t e = 0; e < hd; ++e)
          for (int64_t s = 0; s < n; ++s)
            out.data<double>()[(b * L + t) * H * hd + h * hd + e] +=
                w[s] / total * values.data<double>()[((b * Hkv + j) * cap + s) * hd + e];
      }
  }

  Context ctx("ref", 1);
  Arena::Scope scope(ctx.arena());
  const Tensor qkv = qkv0.clone(), k_cache = kc0.clone(), v_cache = vc0.clone();
  const Tensor got = Tensor::zeros(DType::kF64, {B, L, H * hd});
  const ops::AttentionArgs a{.heads = H,
                             .kv_heads = Hkv,
                             .qkv = qkv,
                             .inv_freq = inv_freq,
                             .k_cache = k_cache,
                             .v_cache = v_cache,
                             .past = testing::i64_tensor(past),
                             .scale = static_cast<float>(scale),
                             .out = got};
  ref::attention_append_kv<double>(ctx, a);
  ref::attention<double>(ctx, a);
  EXPECT_TRUE(testing::close64(qkv.cols(0, H * hd), q.cols(0, H * hd), 1e-14));
  EXPECT_TRUE(testing::close64(got, out, 1e-13));
  // The cache holds the new tokens' rotated keys and values, the old ones kept.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t used = past[b] + L;
    EXPECT_TRUE(testing::close64(k_cache.index(b).slice(1, 0, used),
                                 keys.index(b).slice(1, 0, used), 1e-14));
    EXPECT_TRUE(
        testing::close64(v_cache.index(b).slice(1, 0, used), values.index(b).slice(1, 0, used), 0));
  }
}

// attention(q, k, v) for fresh sequences (past = 0), q the first H hd
// columns of qkv, k and v the caches.
Tensor attention_out(Context& ctx, const Tensor& qkv, const Tensor& k, const Tensor& v, int64_t H,
                     int64_t Hkv, float scale) {
  const int64_t B = k.dim(0), L = k.dim(2), hd = k.dim(3);
  const Tensor out = Tensor::zeros(DType::kF64, {B, L, H * hd});
  ref::attention<double>(ctx, {.heads = H,
                               .kv_heads = Hkv,
                               .qkv = qkv,
                               .k_cache = k,
                               .v_cache = v,
                               .past = testing::i64_tensor(std::vector<int64_t>(B, 0)),
                               .scale = scale,
                               .out = out});
  return out;
}

void check_backward(int64_t B, int64_t L, int64_t H, int64_t Hkv, int64_t hd) {
  const float scale = 0.7f;
  const int64_t width = (H + 2 * Hkv) * hd;
  Tensor qkv = to_f64(testing::random_tensor({B, L, width}, 11, -2.f, 2.f));
  Tensor k = to_f64(testing::random_tensor({B, Hkv, L, hd}, 12, -2.f, 2.f));
  Tensor v = to_f64(testing::random_tensor({B, Hkv, L, hd}, 13));
  const Tensor w = to_f64(testing::random_tensor({B, L, H * hd}, 14));
  Context ctx("ref", 1);
  Arena::Scope scope(ctx.arena());
  // sum(w o attention(q, k, v))
  auto J = [&] { return testing::weighted_sum(attention_out(ctx, qkv, k, v, H, Hkv, scale), w); };
  const Tensor gq = fd_gradient(qkv, J).cols(0, H * hd), gk = fd_gradient(k, J),
               gv = fd_gradient(v, J);

  const Tensor out = attention_out(ctx, qkv, k, v, H, Hkv, scale);
  const Tensor dq = Tensor::zeros(DType::kF64, {B, L, H * hd});
  const Tensor dk = Tensor::zeros(DType::kF64, {B, L, Hkv * hd}), dv = dk.clone();
  ref::attention_backward<double>(ctx, {.heads = H,
                                        .kv_heads = Hkv,
                                        .q = qkv.cols(0, H * hd),
                                        .k = k,
                                        .v = v,
                                        .out = out,
                                        .dout = w,
                                        .scale = scale,
                                        .dq = dq,
                                        .dk = dk,
                                        .dv = dv});
  // dk, dv come as rows (b, t) of H_kv heads; the caches are head-major.
  auto head_major = [&](const Tensor& d) { return d.reshape({B, L, Hkv, hd}).clone(); };
  auto fd_rows = [&](const Tensor& g) {  // (B, H_kv, L, hd) -> (B, L, H_kv, hd)
    Tensor r = Tensor::empty(DType::kF64, {B, L, Hkv, hd});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < Hkv; ++j)
        for (int64_t t = 0; t < L; ++t)
          for (int64_t e = 0; e < hd; ++e)
            r.data<double>()[((b * L + t) * Hkv + j) * hd + e] =
                g.data<double>()[((b * Hkv + j) * L + t) * hd + e];
    return r;
  };
  EXPECT_TRUE(testing::close64(dq, gq, 1e-8));
  EXPECT_TRUE(testing::close64(head_major(dk), fd_rows(gk), 1e-8));
  EXPECT_TRUE(testing::close64(head_major(dv), fd_rows(gv), 1e-8));
}

TEST(AttentionRef, BackwardMatchesFiniteDifferencesWithGqa) { check_backward(2, 7, 4, 2, 3); }
TEST(AttentionRef, BackwardMatchesFiniteDifferencesOverSeveralQueryBlocks) {
  check_backward(1, 70, 2, 1, 2);
}

TEST(AttentionRef, RopeBackwardMatchesFiniteDifferencesOfTheRotation) {
  const int64_t B = 2, L = 5, H = 3, Hkv = 1, hd = 6, rot = 4;
  const int64_t width = (H + 2 * Hkv) * hd;
  const Tensor inv_freq = testing::rope_inv_freq(rot, DType::kF64);
  Tensor x = to_f64(testing::random_tensor({B, L, width}, 21));
  const Tensor w = to_f64(testing::random_tensor({B, L, (H + Hkv) * hd}, 22));
  Context ctx("ref", 1);
  Arena::Scope scope(ctx.arena());
  // sum(w o rotated [q | k]) of fresh sequences.
  auto J = [&] {
    const Tensor qkv = x.clone();
    const Tensor cache = Tensor::zeros(DType::kF64, {B, Hkv, L, hd});
    ref::attention_append_kv<double>(ctx,
                                     {.heads = H,
                                      .kv_heads = Hkv,
                                      .qkv = qkv,
                                      .inv_freq = inv_freq,
                                      .k_cache = cache,
                                      .v_cache = cache.clone(),
                                      .past = testing::i64_tensor(std::vector<int64_t>(B, 0))});
    return testing::weighted_sum(qkv.cols(0, (H + Hkv) * hd), w);
  };
  const Tensor g = fd_gradient(x, J);
  const Tensor d = w.clone();
  ref::rope_backward<double>(ctx, {.heads = H,
                                   .kv_heads = Hkv,
                                   .head_dim = hd,
                                   .inv_freq = inv_freq,
                                   .dq = d.cols(0, H * hd),
                                   .dk = d.cols(H * hd, (H + Hkv) * hd)});
  EXPECT_TRUE(testing::close64(d, g.cols(0, (H + Hkv) * hd).clone(), 1e-9));
}

}  // namespace
}  // namespace ssm
