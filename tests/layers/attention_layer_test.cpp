// The attention layer against a plain float64 attention written here (GQA,
// rotary on part of the head, biases), continuing from its KV cache across
// calls and one token at a time, sequences of different lengths decoding in
// one batch, and a cache that grows geometrically or not at all once
// reserved.
#include "ssm/layers/attention_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "support/backends.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

struct AttnCase {
  int64_t heads, kv_heads, head_dim, rotary;
  bool bias;
  std::string name;
};
void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

AttentionConfig make_config(const AttnCase& ac) {
  AttentionConfig c;
  c.d_model = 32;
  c.num_heads = ac.heads;
  c.num_heads_kv = ac.kv_heads;
  c.head_dim = ac.head_dim;
  c.rotary_emb_dim = ac.rotary;
  c.qkv_proj_bias = c.out_proj_bias = ac.bias;
  return c;
}

std::unique_ptr<AttentionLayer> make_layer(const AttnCase& ac, uint64_t seed) {
  auto layer = std::make_unique<AttentionLayer>(make_config(ac));
  for (Param& p : layer->parameters())
    p.value = testing::random_tensor(p.shape, seed++, -0.4f, 0.4f);
  return layer;
}

// Causal softmax attention from a fresh sequence, straight from SPEC §5.
std::vector<float> reference(const AttentionLayer& layer, const Tensor& x) {
  const AttentionConfig& c = layer.config();
  const int64_t B = x.dim(0), L = x.dim(1), Dm = c.d_model, H = c.num_heads, Hkv = c.num_heads_kv;
  const int64_t hd = c.head_dim, rot = c.rotary_emb_dim, W = hd * (H + 2 * Hkv);
  const float* w_in = layer.param("in_proj.weight").value.data<float>();
  const float* w_out = layer.param("out_proj.weight").value.data<float>();
  const float* b_in = c.qkv_proj_bias ? layer.param("in_proj.bias").value.data<float>() : nullptr;
  const float* b_out = c.out_proj_bias ? layer.param("out_proj.bias").value.data<float>() : nullptr;
  const double scale = 1 / std::sqrt(static_cast<double>(hd));
  std::vector<float> out(B * L * Dm);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> qkv(L * W);
    for (int64_t t = 0; t < L; ++t) {
      double* row = &qkv[t * W];
      for (int64_t j = 0; j < W; ++j) {
        row[j] = b_in ? b_in[j] : 0;
        for (int64_t d = 0; d < Dm; ++d)
          row[j] += x.data<float>()[(b * L + t) * Dm + d] * static_cast<double>(w_in[j * Dm + d]);
      }
      for (int64_t head = 0; head < H + Hkv; ++head)  // q heads, then k heads
        for (int64_t i = 0; i < rot / 2; ++i) {
          const double angle = t * std::pow(c.rotary_emb_base, -2.0 * i / rot);
          double* e = row + head * hd;
          const double a0 = e[i], a1 = e[i + rot / 2];
          e[i] = a0 * std::cos(angle) - a1 * std::sin(angle);
          e[i + rot / 2] = a0 * std::sin(angle) + a1 * std::cos(angle);
        }
    }
    std::vector<double> o(L * H * hd, 0);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / Hkv);
      for (int64_t t = 0; t < L; ++t) {
        std::vector<double> p(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t s = 0; s <= t; ++s) {
          p[s] = 0;
          for (int64_t d = 0; d < hd; ++d)
            p[s] += qkv[t * W + h * hd + d] * qkv[s * W + (H + kvh) * hd + d];
          mx = std::max(mx, p[s] *= scale);
        }
        for (double& v : p) sum += v = std::exp(v - mx);
        for (int64_t s = 0; s <= t; ++s)
          for (int64_t d = 0; d < hd; ++d)
            o[(t * H + h) * hd + d] += p[s] / sum * qkv[s * W + (H + Hkv + kvh) * hd + d];
      }
    }
    for (int64_t t = 0; t < L; ++t)
      for (int64_t d = 0; d < Dm; ++d) {
        double acc = b_out ? b_out[d] : 0;
        for (int64_t i = 0; i < H * hd; ++i) acc += o[t * H * hd + i] * w_out[d * H * hd + i];
        out[(b * L + t) * Dm + d] = static_cast<float>(acc);
      }
  }
  return out;
}

Tensor time_slice(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.dim(0), L = x.dim(1), D = x.dim(2);
  Tensor out = Tensor::empty(DType::kF32, {B, t1 - t0, D});
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(x.data<float>() + (b * L + t0) * D, (t1 - t0) * D,
                out.data<float>() + b * (t1 - t0) * D);
  return out;
}

void put_time_slice(Tensor& dst, int64_t t0, const Tensor& src) {
  const int64_t B = dst.dim(0), L = dst.dim(1), l = src.dim(1), D = dst.dim(2);
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(src.data<float>() + b * l * D, l * D, dst.data<float>() + (b * L + t0) * D);
}

class AttentionCases : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionCases, ForwardMatchesPlainAttention) {
  auto layer = make_layer(GetParam(), 1);
  const Tensor x = testing::random_tensor({2, 70, 32}, 3);  // more than one query block
  const std::vector<float> want = reference(*layer, x);
  for (const auto& [backend, threads] :
       {std::pair<std::string, int>{"cpu", 1}, {"cpu", 2}, {"ref", 1}}) {
    Context ctx(backend, threads);
    Tensor y = Tensor::empty(DType::kF32, x.shape());
    layer->forward(x, y, nullptr, ctx);
    EXPECT_LE(testing::max_rel_error(y.data<float>(), want.data(), y.numel()), 1e-5)
        << backend << " " << threads;
  }
}

TEST_P(AttentionCases, PrefillInPartsAndStepsContinueTheCache) {
  auto layer = make_layer(GetParam(), 2);
  const int64_t B = 2, L = 75;
  const Tensor x = testing::random_tensor({B, L, 32}, 4);
  std::vector<float> want_v = reference(*layer, x);
  Tensor want = Tensor::empty(DType::kF32, x.shape());
  std::copy(want_v.begin(), want_v.end(), want.data<float>());
  for (const std::string& backend : testing::all_backends()) {
  Context ctx(backend, 2);
  auto st = layer->make_state(B);
  Tensor y = Tensor::empty(DType::kF32, x.shape());
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 9}, {9, 10}, {10, 70}}) {
    Tensor yp = Tensor::empty(DType::kF32, {B, t1 - t0, 32});
    layer->forward(time_slice(x, t0, t1), yp, st.get(), ctx);
    put_time_slice(y, t0, yp);
  }
  Tensor xt = Tensor::empty(DType::kF32, {B, 32}), yt = Tensor::empty(DType::kF32, {B, 32});
  for (int64_t t = 70; t < L; ++t) {
    std::copy_n(time_slice(x, t, t + 1).data<float>(), B * 32, xt.data<float>());
    layer->step(xt, yt, *st, ctx);
    put_time_slice(y, t, yt.reshape({B, 1, 32}));
  }
  EXPECT_LE(testing::max_rel_error(y, want), 1e-5);
  auto& kv = static_cast<AttentionState&>(*st);
  EXPECT_EQ(kv.length(0), L);
  EXPECT_EQ(kv.length(1), L);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, AttentionCases,
                         ::testing::Values(AttnCase{4, 2, 16, 8, true, "gqa2_rotary_half"},
                                           AttnCase{4, 1, 8, 8, true, "mqa_rotary_full"},
                                           AttnCase{2, 2, 16, 0, false, "mha_plain_nobias"}),
                         [](const auto& info) { return info.param.name; });

// Sequences with 5 and 9 cached tokens step together as they would alone.
TEST(AttentionLayer, BatchOfDifferentLengthsDecodesLikeSingleSequences) {
  const AttnCase ac{4, 2, 16, 8, true, ""};
  auto layer = make_layer(ac, 5);
  Context ctx(2);
  const int64_t lens[2] = {5, 9};
  std::unique_ptr<LayerState> single[2];
  auto batch = layer->make_state(2);
  auto& bkv = static_cast<AttentionState&>(*batch);
  bkv.reserve(ctx, 32);
  for (int b = 0; b < 2; ++b) {
    single[b] = layer->make_state(1);
    Tensor y = Tensor::empty(DType::kF32, {1, lens[b], 32});
    layer->forward(testing::random_tensor({1, lens[b], 32}, 10 + b), y, single[b].get(), ctx);
    auto& s = static_cast<AttentionState&>(*single[b]);
    for (int64_t h = 0; h < 2; ++h) {  // rows [0, len) of every kv head
      const size_t n = lens[b] * 16 * sizeof(float);
      std::memcpy(bkv.k.data<float>() + (b * 2 + h) * 32 * 16,
                  s.k.data<float>() + h * s.capacity() * 16, n);
      std::memcpy(bkv.v.data<float>() + (b * 2 + h) * 32 * 16,
                  s.v.data<float>() + h * s.capacity() * 16, n);
    }
    bkv.lengths.data<int64_t>()[b] = lens[b];
  }
  for (int step = 0; step < 4; ++step) {
    const Tensor x = testing::random_tensor({2, 32}, 100 + step);
    Tensor y = Tensor::empty(DType::kF32, {2, 32});
    layer->step(x, y, *batch, ctx);
    for (int64_t b = 0; b < 2; ++b) {
      Tensor yb = Tensor::empty(DType::kF32, {1, 32});
      layer->step(x.rows(b, b + 1), yb, *single[b], ctx);
      EXPECT_LE(testing::max_rel_error(y.data<float>() + b * 32, yb.data<float>(), 32), 1e-6)
          << step;
    }
  }
  EXPECT_EQ(bkv.length(0), 9);
  EXPECT_EQ(bkv.length(1), 13);
}

TEST(AttentionLayer, CacheGrowsGeometricallyOrNotAtAllOnceReserved) {
  auto layer = make_layer({2, 1, 8, 4, true, ""}, 6);
  Context ctx(1);
  const Tensor x = testing::random_tensor({3, 32}, 7);
  Tensor y = Tensor::empty(DType::kF32, {3, 32});
  auto st = layer->make_state(3);
  auto& kv = static_cast<AttentionState&>(*st);
  int regrowths = 0;
  for (int t = 0; t < 200; ++t) {
    const float* before = kv.k.data<float>();
    layer->step(x, y, *st, ctx);
    regrowths += kv.k.data<float>() != before;
  }
  EXPECT_LE(regrowths, 5);  // 16, 32, 64, 128, 256
  EXPECT_EQ(kv.length(2), 200);

  auto reserved = layer->make_state(3);
  auto& rkv = static_cast<AttentionState&>(*reserved);
  rkv.reserve(ctx, 300);
  const float* data = rkv.k.data<float>();
  for (int t = 0; t < 300; ++t) layer->step(x, y, *reserved, ctx);
  EXPECT_EQ(rkv.k.data<float>(), data);
  EXPECT_EQ(rkv.capacity(), 300);
}

}  // namespace
}  // namespace ssm
