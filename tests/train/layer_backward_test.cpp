// Layer backwards on every backend against centred differences of the
// layers' own fp32 forwards on that backend, for the
// Mamba-2 variants no golden covers and for the gated MLP. Sampled
// coordinates of every parameter and of the input; tolerance chosen for
// fp32 forwards with step 1e-2.
#include <gtest/gtest.h>

#include <cmath>

#include "ssm/layers/gated_mlp.h"
#include "ssm/layers/mamba2_layer.h"
#include "support/backends.h"
#include "support/layer_backward.h"
#include "support/random.h"

namespace ssm {
namespace {

double objective(SequenceLayer& layer, const Tensor& x, const Tensor& w, Context& ctx) {
  Tensor y = Tensor::empty(DType::kF32, x.shape());
  layer.forward(x, y, nullptr, ctx);
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(w.data<float>()[i]) * y.data<float>()[i];
  return s;
}

// Checks up to 8 coordinates of t against analytic gradient g.
void check_coordinates(const std::string& what, Tensor& t, const Tensor& g, SequenceLayer& layer,
                       const Tensor& x, const Tensor& w, Context& ctx) {
  double scale = 0;
  for (int64_t i = 0; i < g.numel(); ++i) scale = std::max(scale, std::abs(double(g.data<float>()[i])));
  const int64_t n = t.numel(), stride = std::max<int64_t>(1, n / 8);
  for (int64_t i = n / 17; i < n; i += stride) {
    float& v = t.data<float>()[i];
    const float keep = v, h = 1e-2f;
    v = keep + h;
    const double up = objective(layer, x, w, ctx);
    v = keep - h;
    const double down = objective(layer, x, w, ctx);
    v = keep;
    const double fd = (up - down) / (2.0 * h);
    EXPECT_NEAR(g.data<float>()[i], fd, 1e-2 * scale + 1e-4) << what << "[" << i << "]";
  }
}

void check_layer(SequenceLayer& layer, int64_t B, int64_t L, int64_t D, uint64_t seed) {
  for (const std::string& backend : testing::all_backends()) {
  SCOPED_TRACE(backend);
  Context ctx(backend, 2);
  const Tensor x = testing::random_tensor({B, L, D}, seed);
  const Tensor w = testing::random_tensor({B, L, D}, seed + 1);
  Tensor dx = Tensor::empty(DType::kF32, x.shape());
  std::vector<Tensor> grads;
  for (const Param& p : layer.parameters()) grads.push_back(Tensor::zeros(DType::kF32, p.shape));
  testing::run_layer_backward(layer, x, w, dx, grads, ctx);
  Tensor xv = x.clone();
  check_coordinates("x", xv, dx, layer, xv, w, ctx);
  for (size_t k = 0; k < grads.size(); ++k) {
    Param& p = layer.parameters()[k];
    check_coordinates(p.name, p.value, grads[k], layer, x, w, ctx);
  }
  }
}

void randomize(SequenceLayer& layer, uint64_t seed) {
  for (Param& p : layer.parameters()) {
    const bool vector = p.shape.size() == 1;
    p.value = testing::random_tensor(p.shape, seed++, vector ? 0.5f : -0.4f, vector ? 1.5f : 0.4f);
  }
}

struct Variant {
  const char* name;
  void (*apply)(Mamba2Config&);
};

class Mamba2Backward : public ::testing::TestWithParam<Variant> {};

TEST_P(Mamba2Backward, MatchesCentredDifferences) {
  Mamba2Config c{.d_model = 12, .d_state = 4, .d_conv = 3, .expand = 2, .headdim = 6, .ngroups = 2,
                 .chunk_size = 4};
  GetParam().apply(c);
  Mamba2Layer layer(c);
  randomize(layer, 40);
  check_layer(layer, 2, 9, c.d_model, 7);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, Mamba2Backward,
    ::testing::Values(Variant{"defaults", [](Mamba2Config&) {}},
                      Variant{"norm_before_gate", [](Mamba2Config& c) { c.norm_before_gate = true; }},
                      Variant{"no_rmsnorm", [](Mamba2Config& c) { c.rmsnorm = false; }},
                      Variant{"biases", [](Mamba2Config& c) { c.proj_bias = true; c.conv_bias = false; }},
                      Variant{"dt_limit", [](Mamba2Config& c) { c.dt_limit_lo = 0.3; c.dt_limit_hi = 1.2; }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MlpBackward, MatchesCentredDifferences) {
  GatedMlp mlp(10, 8);
  randomize(mlp, 70);
  check_layer(mlp, 2, 5, 10, 9);
}

TEST(Mamba2Backward, ChunkedAndSequentialForwardsGiveTheSameGradient) {
  // The backward recomputes with the chunked scan whatever the forward used;
  // its gradient must not depend on the chunk size beyond fp32 rounding.
  Mamba2Config c{.d_model = 16, .d_state = 8, .headdim = 8, .chunk_size = 3};
  Mamba2Layer a(c);
  randomize(a, 90);
  c.chunk_size = 64;
  Mamba2Layer b(c);
  for (size_t k = 0; k < a.parameters().size(); ++k) b.parameters()[k].value = a.parameters()[k].value;
  Context ctx(1);
  const Tensor x = testing::random_tensor({1, 11, 16}, 3), dy = testing::random_tensor({1, 11, 16}, 4);
  Tensor dxa = x.clone(), dxb = x.clone();
  std::vector<Tensor> ga, gb;
  for (const Param& p : a.parameters()) {
    ga.push_back(Tensor::zeros(DType::kF32, p.shape));
    gb.push_back(Tensor::zeros(DType::kF32, p.shape));
  }
  testing::run_layer_backward(a, x, dy, dxa, ga, ctx);
  testing::run_layer_backward(b, x, dy, dxb, gb, ctx);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(dxa.data<float>()[i], dxb.data<float>()[i], 1e-4);
}

}  // namespace
}  // namespace ssm
