// Training the HF families on the GPU (label gpu): each golden model of
// tests/golden/models (Mamba-1, FalconMamba, and the hybrids with attention,
// relu^2 and GELU MLPs, mixtures of experts and Zamba2's shared block),
// loaded as published, trained 8 F32 steps from one seed on the cpu backend
// and on cuda: the losses agree step by step within 1e-4 relative and every
// trained weight within 1e-3 of the cpu's (SPEC §7's normalised error,
// max |gpu - cpu| / max |cpu| per tensor). This runs every backward op
// these families use on the GPU, the selective scan, router and routed
// experts backwards among them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ssm/train/trainer.h"
#include "support/backends.h"
#include "support/compare.h"
#include "train/tiny_model.h"

namespace ssm {
namespace {

using testing::host;
using testing::max_rel_error;

constexpr int64_t kSteps = 8;

TrainOptions options() {
  return TrainOptions{.steps = kSteps,
                      .batch = 2,
                      .seq_len = 24,
                      .accumulation = 1,
                      .lr = 3e-3,
                      .warmup = 1,
                      .weight_decay = 0.1,
                      .clip = 1.0,
                      .seed = 7};
}

// The losses of kSteps steps on a backend; model is moved there and trained.
std::vector<double> train(LanguageModel& model, const std::vector<int32_t>& tokens,
                          const std::string& backend) {
  Context ctx(backend, 2);
  model.to_device(ctx.device());
  Trainer t(model, tokens, options(), ctx);
  std::vector<double> losses;
  while (!t.finished()) losses.push_back(t.step().loss);
  return losses;
}

class GpuHfFamilyTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuHfFamilyTraining, StepsAgreeWithTheCpu) {
  const std::string dir = testing::golden_dir("models/" + GetParam());
  // Ids below 41: every family's vocabulary (256) holds them.
  const std::vector<int32_t> tokens = testing::tiny_tokens(4000);
  LanguageModel cpu = LanguageModel::load(dir), gpu = LanguageModel::load(dir);
  const std::vector<double> want = train(cpu, tokens, "cpu");
  const std::vector<double> got = train(gpu, tokens, "cuda");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i])) << "step " << i + 1;
  EXPECT_LT(want.back(), want.front());  // it trains

  std::map<std::string, Tensor> trained;
  cpu.for_each_param([&](const std::string& name, Param& p) { trained[name] = host(p.value); });
  size_t compared = 0;
  gpu.for_each_param([&](const std::string& name, Param& p) {
    ASSERT_TRUE(trained.count(name)) << name;
    EXPECT_LE(max_rel_error(host(p.value), trained[name]), 1e-3) << name;
    ++compared;
  });
  EXPECT_EQ(compared, trained.size());
}

INSTANTIATE_TEST_SUITE_P(Families, GpuHfFamilyTraining,
                         ::testing::Values("mamba1_hf", "falcon_mamba_hf", "granite_hybrid_hf",
                                           "nemotron_h_hf", "nemotron_h_moe_hf", "falcon_h1_hf",
                                           "bamba_hf", "jamba_hf", "zamba2_hf"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ssm
