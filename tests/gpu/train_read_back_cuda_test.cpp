// Training steps on the GPU that do not wait for the device (label gpu): a
// run that reads its loss and gradient norm back at every step and one
// that reads them only at its last step end with the same weights to the
// bit (F32 and --bf16, Mamba-2 and Mamba-3 SISO, clipped at
// every step or by the usual bound, with gradient accumulation), and the
// last step reports the same loss and norm in both.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/tiny_kinds.h"
#include "ssm/train/trainer.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

struct Finish {
  std::vector<Tensor> weights;  // on the host
  StepReport last;
};

// `steps` steps of a tiny model on cuda; every: read back at every step.
Finish train(const std::string& kind, bool bf16, double clip, int64_t accumulation, bool every) {
  static const std::vector<int32_t> tokens = testing::tiny_tokens(20000);
  constexpr int64_t steps = 12;
  Context ctx("cuda", 1);
  if (bf16) {
    EXPECT_TRUE(ctx.resources()->set_bf16_compute(true));
  }
  LanguageModel model = testing::tiny_kind_model(kind, 11);
  model.to_device(ctx.device());
  Trainer t(model, tokens,
            TrainOptions{.steps = steps, .batch = 4, .seq_len = 64, .accumulation = accumulation,
                         .lr = 3e-3, .warmup = 3, .clip = clip, .seed = 7},
            ctx);
  Finish f;
  for (int64_t i = 0; i < steps; ++i) {
    const bool read = every || i + 1 == steps;
    f.last = t.step(read);
    EXPECT_EQ(std::isnan(f.last.loss), !read) << "step " << i + 1;
    EXPECT_EQ(std::isnan(f.last.grad_norm), !read) << "step " << i + 1;
  }
  model.for_each_param([&](const std::string&, Param& p) {
    if (p.value.defined()) f.weights.push_back(testing::host(p.value));
  });
  return f;
}

using Case = std::tuple<std::string, bool, double, int64_t>;  // kind, bf16, clip, accumulation
class GpuTrainingReadBack : public ::testing::TestWithParam<Case> {};

TEST_P(GpuTrainingReadBack, ReadingBackRarelyChangesNoBit) {
  const auto& [kind, bf16, clip, accumulation] = GetParam();
  const Finish every = train(kind, bf16, clip, accumulation, true);
  const Finish rarely = train(kind, bf16, clip, accumulation, false);
  ASSERT_EQ(every.weights.size(), rarely.weights.size());
  for (size_t i = 0; i < every.weights.size(); ++i) {
    const Tensor &a = rarely.weights[i], &b = every.weights[i];
    ASSERT_EQ(a.nbytes(), b.nbytes()) << "parameter " << i;
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "parameter " << i;
  }
  EXPECT_EQ(rarely.last.loss, every.last.loss);
  EXPECT_EQ(rarely.last.grad_norm, every.last.grad_norm);
  EXPECT_EQ(rarely.last.step, every.last.step);
  // A clip of 0.05 scales every step's gradients: the fused clip ran.
  if (clip < 0.1) {
    EXPECT_GT(every.last.grad_norm, clip);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runs, GpuTrainingReadBack,
    ::testing::Values(Case{"mamba2", false, 1.0, 1}, Case{"mamba2", false, 0.05, 2},
                      Case{"mamba2", true, 0.05, 1}, Case{"mamba3_siso", false, 0.05, 1},
                      Case{"mamba3_siso", true, 1.0, 2}),
    [](const ::testing::TestParamInfo<Case>& i) {
      // std::get, not a structured binding: its commas would split the macro's arguments.
      return std::get<0>(i.param) + (std::get<1>(i.param) ? "_bf16" : "_f32") +
             (std::get<2>(i.param) < 0.1 ? "_clipped" : "") + "_x" + std::to_string(std::get<3>(i.param));
    });

}  // namespace
}  // namespace ssm
