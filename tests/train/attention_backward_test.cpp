// Attention backwards against centred differences in float64: the causal
// GQA softmax op, the RoPE rotation, and backward_attention against a
// float64 transcription of SPEC §5 (biases, GQA, rotary on part of the head)
// over every coordinate of every parameter and of the input; 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "fd.h"
#include "ssm/layers/attention_layer.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/attention_backward.h"
#include "ssm/train/ops/rotary_backward.h"
#include "support/random.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

// out[t, h] = softmax_{s<=t}(scale q_t,h . k_s,j) v_s,j with j = h / (H / Hkv);
// q rows (b*L + t) of H*hd, k and v (B, Hkv, L, hd); adds sum(w * out) to total.
double attention64(const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, const std::vector<double>& w, int64_t B, int64_t L,
                   int64_t H, int64_t Hkv, int64_t hd, double scale) {
  double total = 0;
  std::vector<double> p(L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t j = h / (H / Hkv);
      const double* K = k.data() + (b * Hkv + j) * L * hd;
      const double* V = v.data() + (b * Hkv + j) * L * hd;
      for (int64_t t = 0; t < L; ++t) {
        const double* qt = q.data() + (b * L + t) * H * hd + h * hd;
        double mx = -1e300, sum = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += qt[e] * K[s * hd + e];
          p[s] = scale * d;
          mx = std::max(mx, p[s]);
        }
        for (int64_t s = 0; s <= t; ++s) sum += p[s] = std::exp(p[s] - mx);
        for (int64_t e = 0; e < hd; ++e) {
          double o = 0;
          for (int64_t s = 0; s <= t; ++s) o += p[s] / sum * V[s * hd + e];
          total += w[(b * L + t) * H * hd + h * hd + e] * o;
        }
      }
    }
  return total;
}

void check_attention_backward(int64_t B, int64_t L, int64_t H, int64_t Hkv, int64_t hd) {
  const double scale = 0.7;
  auto q = random_doubles(B * L * H * hd, 11, -2.f, 2.f), k = random_doubles(B * Hkv * L * hd, 12, -2.f, 2.f);
  auto v = random_doubles(B * Hkv * L * hd, 13);
  const auto w = random_doubles(B * L * H * hd, 14);
  auto J = [&] { return attention64(q, k, v, w, B, L, H, Hkv, hd, scale); };
  const auto gq = fd_gradient(q, J), gk = fd_gradient(k, J), gv = fd_gradient(v, J);

  // The forward's output O, which the backward reads (in float64, rounded).
  std::vector<double> out(B * L * H * hd);
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> unit(out.size(), 0.0);
    unit[i] = 1;
    out[i] = attention64(q, k, v, unit, B, L, H, Hkv, hd, scale);
  }
  const auto qf = to_float(q), kf = to_float(k), vf = to_float(v), wf = to_float(w), of = to_float(out);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    // dk, dv rows are (b*L + t) x Hkv*hd; the reference's k is head-major.
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    ops::attention_backward({.batch = B, .length = L, .heads = H, .kv_heads = Hkv, .head_dim = hd,
                             .q = qf.data(), .ld_q = H * hd, .k = kf.data(), .v = vf.data(),
                             .out = of.data(), .dout = wf.data(), .ld_out = H * hd,
                             .scale = static_cast<float>(scale), .dq = dq.data(), .ld_dq = H * hd,
                             .dk = dk.data(), .dv = dv.data(), .ld_dkv = Hkv * hd},
                            pool);
    std::vector<float> dk_hm(k.size()), dv_hm(v.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t j = 0; j < Hkv; ++j)
          for (int64_t e = 0; e < hd; ++e) {
            dk_hm[((b * Hkv + j) * L + t) * hd + e] = dk[(b * L + t) * Hkv * hd + j * hd + e];
            dv_hm[((b * Hkv + j) * L + t) * hd + e] = dv[(b * L + t) * Hkv * hd + j * hd + e];
          }
    EXPECT_LE(rel_error(dq, gq), 5e-5) << "dq, " << threads << " threads";
    EXPECT_LE(rel_error(dk_hm, gk), 5e-5) << "dk";
    EXPECT_LE(rel_error(dv_hm, gv), 5e-5) << "dv";
  }
}

TEST(AttentionBackward, MatchesFiniteDifferencesWithGqa) { check_attention_backward(2, 7, 4, 2, 3); }

// More queries than one 64-row block of the forward and backward.
TEST(AttentionBackward, MatchesFiniteDifferencesOverSeveralQueryBlocks) {
  check_attention_backward(1, 70, 2, 1, 2);
}

TEST(RopeBackward, MatchesFiniteDifferences) {
  const int64_t B = 2, L = 5, H = 3, Hkv = 1, hd = 6, rot = 4, ld = (H + 2 * Hkv) * hd + 1;
  std::vector<float> inv_freq(rot / 2);
  ops::rope_inv_freq(rot, 10000.0, inv_freq.data());
  auto qk = random_doubles(B * L * ld, 21);
  const auto w = random_doubles(B * L * ld, 22);
  auto J = [&] {
    double total = 0;
    for (int64_t row = 0; row < B * L; ++row)
      for (int64_t h = 0; h < H + Hkv; ++h) {
        std::vector<double> e(qk.begin() + row * ld + h * hd, qk.begin() + row * ld + (h + 1) * hd);
        for (int64_t i = 0; i < rot / 2; ++i) {
          const double angle = static_cast<double>(row % L) * inv_freq[i];
          const double a = e[i], b = e[i + rot / 2];
          e[i] = a * std::cos(angle) - b * std::sin(angle);
          e[i + rot / 2] = a * std::sin(angle) + b * std::cos(angle);
        }
        for (int64_t d = 0; d < hd; ++d) total += w[row * ld + h * hd + d] * e[d];
      }
    return total;
  };
  auto expected = fd_gradient(qk, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    auto d = to_float(w);
    ops::rope_backward(d.data(), ld, B, L, H, Hkv, hd, rot, inv_freq.data(), pool);
    // Columns past q and k are left as they were (w there, 0 in J).
    for (int64_t row = 0; row < B * L; ++row)
      for (int64_t col = (H + Hkv) * hd; col < ld; ++col) {
        EXPECT_EQ(d[row * ld + col], static_cast<float>(w[row * ld + col]));
        d[row * ld + col] = 0.f;
      }
    EXPECT_LE(rel_error(d, expected), 1e-5) << threads << " threads";
  }
}

// backward_attention against the float64 layer: in_proj (+ bias), RoPE,
// attention64, out_proj (+ bias).
struct AttnVariant {
  const char* name;
  int64_t heads, kv_heads, rotary;
  bool biases;
};
void PrintTo(const AttnVariant& v, std::ostream* os) { *os << v.name; }

class AttentionLayerBackward : public ::testing::TestWithParam<AttnVariant> {};

TEST_P(AttentionLayerBackward, MatchesFloat64FiniteDifferences) {
  const AttnVariant var = GetParam();
  AttentionConfig c{.d_model = 8, .num_heads = var.heads, .num_heads_kv = var.kv_heads, .head_dim = 4,
                    .rotary_emb_dim = var.rotary, .qkv_proj_bias = var.biases, .out_proj_bias = var.biases};
  AttentionLayer layer(c);
  const int64_t B = 2, L = 6, D = c.d_model, H = c.num_heads, Hkv = c.num_heads_kv, hd = c.head_dim;
  const int64_t width = hd * (H + 2 * Hkv);
  std::map<std::string, std::vector<double>> p;
  uint64_t seed = 900;
  for (const Param& prm : layer.parameters()) {
    int64_t n = 1;
    for (int64_t d : prm.shape) n *= d;
    p[prm.name] = random_doubles(n, seed++, -0.6f, 0.6f);
  }
  std::vector<float> inv_freq(var.rotary / 2);
  ops::rope_inv_freq(var.rotary, 10000.0, inv_freq.data());
  auto u = random_doubles(B * L * D, 31, -2.f, 2.f);
  const auto w = random_doubles(B * L * D, 32);
  auto J = [&] {
    std::vector<double> q(B * L * H * hd), k(B * Hkv * L * hd), v(B * Hkv * L * hd), qkv(width);
    for (int64_t row = 0; row < B * L; ++row) {
      for (int64_t i = 0; i < width; ++i) {
        double s = var.biases ? p["in_proj.bias"][i] : 0.0;
        for (int64_t d = 0; d < D; ++d) s += p["in_proj.weight"][i * D + d] * u[row * D + d];
        qkv[i] = s;
      }
      for (int64_t h = 0; h < H + Hkv; ++h)
        for (int64_t i = 0; i < var.rotary / 2; ++i) {
          const double angle = static_cast<double>(row % L) * inv_freq[i];
          double& a = qkv[h * hd + i];
          double& b = qkv[h * hd + i + var.rotary / 2];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(angle) - b0 * std::sin(angle);
          b = a0 * std::sin(angle) + b0 * std::cos(angle);
        }
      const int64_t b = row / L, t = row % L;
      std::copy(qkv.begin(), qkv.begin() + H * hd, q.begin() + row * H * hd);
      for (int64_t j = 0; j < Hkv; ++j)
        for (int64_t e = 0; e < hd; ++e) {
          k[((b * Hkv + j) * L + t) * hd + e] = qkv[(H + j) * hd + e];
          v[((b * Hkv + j) * L + t) * hd + e] = qkv[(H + Hkv + j) * hd + e];
        }
    }
    // sum(w * (A out_w^T + out_b)) = sum(A * (w out_w)) + sum(w out_b).
    std::vector<double> wa(B * L * H * hd, 0.0);
    double total = 0;
    for (int64_t row = 0; row < B * L; ++row)
      for (int64_t d = 0; d < D; ++d) {
        const double wd = w[row * D + d];
        if (var.biases) total += wd * p["out_proj.bias"][d];
        for (int64_t i = 0; i < H * hd; ++i) wa[row * H * hd + i] += wd * p["out_proj.weight"][d * H * hd + i];
      }
    return total + attention64(q, k, v, wa, B, L, H, Hkv, hd, 1.0 / std::sqrt(double(hd)));
  };
  std::vector<std::vector<double>> expected;
  for (const Param& prm : layer.parameters()) expected.push_back(fd_gradient(p[prm.name], J));
  const auto gu = fd_gradient(u, J);

  for (Param& prm : layer.parameters()) {
    const auto f = to_float(p[prm.name]);
    prm.value = Tensor::empty(DType::kF32, prm.shape);
    std::copy(f.begin(), f.end(), prm.value.data<float>());
  }
  Tensor x = Tensor::empty(DType::kF32, {B, L, D}), dy = x.clone(), dx = x.clone();
  const auto uf = to_float(u), wf = to_float(w);
  std::copy(uf.begin(), uf.end(), x.data<float>());
  std::copy(wf.begin(), wf.end(), dy.data<float>());
  auto as_vector = [](const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
  for (int threads : {1, 2}) {
    Context ctx(threads);
    std::vector<Tensor> grads;
    for (const Param& prm : layer.parameters()) grads.push_back(Tensor::zeros(DType::kF32, prm.shape));
    layer_backward(layer, x, dy, dx, grads, ctx);
    EXPECT_LE(rel_error(as_vector(dx), gu), 1e-4) << "dx, " << threads << " threads";
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_LE(rel_error(as_vector(grads[i]), expected[i]), 1e-4) << layer.parameters()[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionLayerBackward,
                         ::testing::Values(AttnVariant{"mha_biases", 2, 2, 0, true},
                                           AttnVariant{"gqa_rotary", 4, 2, 4, true},
                                           AttnVariant{"mqa_partial_rotary_no_bias", 4, 1, 2, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// max |a - b| / max |b| of two float tensors of one shape.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(double(b.data<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(AttentionLayerBackward, GradientsDoNotDependOnTheThreadCount) {
  AttentionConfig c{.d_model = 32, .num_heads = 4, .num_heads_kv = 2, .head_dim = 8, .rotary_emb_dim = 4};
  AttentionLayer layer(c);
  uint64_t seed = 1100;
  for (Param& p : layer.parameters()) p.value = testing::random_tensor(p.shape, seed++, -0.3f, 0.3f);
  // Longer than one 64-query block.
  const Tensor x = testing::random_tensor({2, 70, c.d_model}, 1);
  const Tensor dy = testing::random_tensor({2, 70, c.d_model}, 2);
  std::vector<std::vector<Tensor>> grads(2);
  std::vector<Tensor> dx(2);
  for (int k = 0; k < 2; ++k) {
    Context ctx(k + 1);
    dx[k] = x.clone();
    for (const Param& p : layer.parameters()) grads[k].push_back(Tensor::zeros(DType::kF32, p.shape));
    layer_backward(layer, x, dy, dx[k], grads[k], ctx);
  }
  EXPECT_LE(max_rel_diff(dx[0], dx[1]), 1e-5) << "dx";
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_LE(max_rel_diff(grads[0][i], grads[1][i]), 1e-5) << layer.parameters()[i].name;
}

}  // namespace
}  // namespace ssm
