// The model gradient of every HF family's golden model (tests/golden/models)
// against centred finite differences of the loss, on every host backend:
// for each parameter tensor, the derivative of the mean loss along the
// tensor's own gradient direction (v = g / |g|, so the expected value |g|
// is never a near-zero difference) and along a random direction. F32
// forward passes, the loss summed in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ssm/io/safetensors.h"
#include "ssm/train/model_grad.h"
#include "support/backends.h"
#include "support/compare.h"
#include "support/hf_families.h"
#include "support/random.h"

namespace ssm {
namespace {

// (family, backend)
class HfFamilyGrad : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

double dot(const Tensor& a, const std::vector<float>& v) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += static_cast<double>(a.data<float>()[i]) * v[i];
  return s;
}

TEST_P(HfFamilyGrad, GradientMatchesFiniteDifferences) {
  const auto& [name, backend] = GetParam();
  const std::string dir = testing::golden_dir("models/" + name);
  LanguageModel model = LanguageModel::load(dir);
  const SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  // Two sequences of 12 tokens: long enough for every layer kind's chunked
  // and step paths to mix, short enough for a difference per tensor.
  const Tensor ids = golden.get("input_ids").slice(1, 0, 12).clone();
  Context ctx(backend, backend == "ref" ? 1 : 2);
  Gradients grads(model, true);
  model_loss_and_grad(model, ids, &grads, 1.0, ctx);

  // Steps along unit directions: at 1e-2 the differences of F32 losses are
  // truncation-limited (~1e-3 of |g|), much below that rounding-limited.
  // The routers' top-k choice is piecewise constant, so a step that moves
  // a token across a tie adds a jump to that step's difference: each
  // direction is differenced at four steps and the best agreement counts
  // (a wrong gradient disagrees at every step alike).
  const double steps[] = {1e-2, 5e-3, 2.5e-3, 1e-3};
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor g = grads.grad(i).to(Device::host());
    Tensor& value = grads.param(i).value;
    ASSERT_EQ(value.dtype(), DType::kF32);
    const int64_t n = g.numel();
    // Nemotron-H's selection bias only chooses experts: no gradient, and
    // any step that changes a choice is a jump. Its gradient must be zero.
    if (grads.name(i).find("e_score_correction_bias") != std::string::npos) {
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(g.data<float>()[j], 0.f) << grads.name(i);
      continue;
    }
    double norm = 0;
    for (int64_t j = 0; j < n; ++j)
      norm += static_cast<double>(g.data<float>()[j]) * g.data<float>()[j];
    norm = std::sqrt(norm);
    for (int direction = 0; direction < 2; ++direction) {
      std::vector<float> v = testing::random_vector(n, 1000 + i * 7 + direction);
      if (direction == 0 && norm > 0)
        for (int64_t j = 0; j < n; ++j) v[j] = g.data<float>()[j];
      double vn = 0;
      for (float x : v) vn += static_cast<double>(x) * x;
      for (float& x : v) x = static_cast<float>(x / std::sqrt(vn));
      const Tensor keep = value.clone();
      auto loss_at = [&](double step) {
        for (int64_t j = 0; j < n; ++j)
          value.data<float>()[j] = static_cast<float>(keep.data<float>()[j] + step * v[j]);
        return model_loss(model, ids, ctx).mean();
      };
      const double want = dot(g, v);
      // Relative to the tensor's gradient norm (the largest derivative
      // along any unit direction), with a floor for tensors the loss barely
      // depends on.
      double err = INFINITY, fd = 0;
      for (double h : steps) {
        const double d = (loss_at(h) - loss_at(-h)) / (2 * h);
        if (std::abs(d - want) / std::max(norm, 1e-3) < err)
          err = std::abs(d - want) / std::max(norm, 1e-3), fd = d;
      }
      std::memcpy(value.raw(), keep.raw(), keep.nbytes());
      if (err > worst) worst = err, worst_name = grads.name(i);
      EXPECT_LE(err, 1e-2) << grads.name(i) << " direction " << direction << ": fd " << fd
                           << ", gradient " << want << ", |g| " << norm;
    }
  }
  RecordProperty("worst_rel_error", std::to_string(worst));
  std::cout << "[fd] " << name << " " << backend << " worst " << worst << " (" << worst_name
            << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyGrad,
                         ::testing::Combine(::testing::ValuesIn(testing::hf_families()),
                                            ::testing::ValuesIn(testing::all_backends())),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace ssm
