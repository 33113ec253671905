// Model gradients against grads.safetensors of the golden cases (SPEC §7:
// float64 reference gradients; <= 1e-3 relative per tensor).
#include <gtest/gtest.h>

#include "ssm/io/safetensors.h"
#include "ssm/train/model_grad.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::max_rel_error;

// (case, backend)
class GoldenGrad : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GoldenGrad, LossAndEveryGradientMatchReference) {
  const auto& [name, backend] = GetParam();
  const std::string dir = golden_dir(name);
  std::optional<LanguageModel> model;
  model.emplace(LanguageModel::load(dir));
  const SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  const SafetensorsFile ref = SafetensorsFile::open(dir + "/grads.safetensors");
  for (int threads : {1, 2}) {
    if (backend == "ref" && threads == 2) continue;  // ref is single-threaded
    Context ctx(backend, threads);
    Gradients grads(*model, true);
    const LossSum loss = model_loss_and_grad(*model, golden.get("input_ids").clone(), &grads, 1.0, ctx);
    const double ref_loss = ref.get("loss").to_f32().data<float>()[0];
    EXPECT_NEAR(loss.mean(), ref_loss, 1e-5 * std::abs(ref_loss)) << threads << " threads";
    for (size_t i = 0; i < grads.size(); ++i) {
      const std::string key = "grad." + grads.name(i);
      ASSERT_TRUE(ref.contains(key)) << key;
      const double err = max_rel_error(grads.grad(i), ref.get(key));
      RecordProperty(cat(key, "_", threads, "t"), std::to_string(err));
      EXPECT_LE(err, 1e-3) << key << ", " << threads << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GoldenGrad,
    ::testing::Combine(::testing::Values("mamba2_hf_tiny", "mamba2_ssm_tiny", "mamba3_siso_tiny",
                                         "mamba3_mimo_tiny", "hybrid_tiny"),
                       ::testing::ValuesIn(testing::all_backends())),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

TEST(LayerBackward, ALayerWithoutBackwardIsAClearError) {
  struct Odd : SequenceLayer {
    std::string kind() const override { return "retention"; }
    std::unique_ptr<LayerState> make_state(int64_t, Device) const override { return nullptr; }
    void forward(const Tensor&, Tensor&, LayerState*, Context&,
                 std::unique_ptr<LayerActivations>*) override {}
  } layer;
  Context ctx(1);
  Tensor x = Tensor::zeros(DType::kF32, {1, 2, 4}), dx = x.clone();
  std::vector<Tensor> grads;
  EXPECT_FALSE(layer.can_train());
  try {
    layer.backward(LayerActivations{}, x, x, dx, grads, ctx);
    FAIL() << "expected ssm::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the retention layer cannot be trained");
  }
}

}  // namespace
}  // namespace ssm
