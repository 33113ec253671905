// Training on the GPU (label gpu): the golden gradients (Mamba-2, Mamba-3
// SISO and MIMO, the Mamba-3 + attention hybrid) hold on cuda, 100 F32
// training steps from one seed give the same losses on the CPU and the GPU
// (1e-4 relative, step by step) for a tiny Mamba-2, Mamba-3 SISO, Mamba-3
// MIMO and hybrid with attention, also with residual dropout (the masks are
// a hash both devices compute alike), and a checkpoint written on either
// device resumes on the other, continuing the same run (with dropout too);
// --bf16's kept weight copies change no loss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "ops/cuda/runtime.h"
#include "ssm/io/safetensors.h"
#include "ssm/train/model_grad.h"
#include "ssm/train/trainer.h"
#include "support/backends.h"
#include "support/compare.h"
#include "gpu/tiny_kinds.h"
#include "train/tiny_model.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::host;
using testing::max_rel_error;
using testing::tiny_kind_model;

class GpuGoldenGrad : public ::testing::TestWithParam<std::string> {};

// SPEC §7: every gradient within 1e-3 of the float64 reference.
TEST_P(GpuGoldenGrad, LossAndEveryGradientMatchReference) {
  const std::string dir = testing::golden_dir(GetParam());
  LanguageModel model = LanguageModel::load(dir);
  Context ctx("cuda", 1);
  model.to_device(ctx.device());
  const SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  const SafetensorsFile ref = SafetensorsFile::open(dir + "/grads.safetensors");
  Gradients grads(model, true);
  const LossSum loss =
      model_loss_and_grad(model, golden.get("input_ids").clone(), &grads, 1.0, ctx);
  const double ref_loss = ref.get("loss").to_f32().data<float>()[0];
  EXPECT_NEAR(loss.mean(), ref_loss, 1e-5 * std::abs(ref_loss));
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string key = "grad." + grads.name(i);
    ASSERT_TRUE(ref.contains(key)) << key;
    const double err = max_rel_error(host(grads.grad(i)), ref.get(key));
    RecordProperty(key, std::to_string(err));
    EXPECT_LE(err, 1e-3) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuGoldenGrad,
                         ::testing::Values("mamba2_hf_tiny", "mamba2_ssm_tiny", "mamba3_siso_tiny",
                                           "mamba3_mimo_tiny", "hybrid_tiny"));

TrainOptions options(int64_t steps) {
  return TrainOptions{.steps = steps,
                      .batch = 4,
                      .seq_len = 64,
                      .accumulation = 1,
                      .lr = 3e-3,
                      .warmup = 10,
                      .weight_decay = 0.1,
                      .clip = 1.0,
                      .seed = 7};
}

// Losses of `steps` steps on a backend, starting from model (moved there).
std::vector<double> run(LanguageModel& model, const std::vector<int32_t>& tokens,
                        const TrainOptions& o, const std::string& backend, int64_t steps,
                        const fs::path& save = {}, const fs::path& resume = {}, bool bf16 = false) {
  Context ctx(backend, 2);
  if (bf16) {
    EXPECT_TRUE(ctx.resources()->set_bf16_compute(true));
  }
  model.to_device(ctx.device());
  Trainer t(model, tokens, o, ctx);
  if (!resume.empty()) t.load_checkpoint(resume);
  std::vector<double> losses;
  for (int64_t i = 0; i < steps && !t.finished(); ++i) losses.push_back(t.step().loss);
  if (!save.empty()) t.save_checkpoint(save);
  return losses;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::abs(want[i])) << "step " << i + 1;
}

class GpuTrainingKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuTrainingKinds, HundredStepsAgreeWithTheCpu) {
  const auto tokens = testing::tiny_tokens(20000);
  const TrainOptions o = options(100);
  LanguageModel cpu = tiny_kind_model(GetParam(), 11), gpu = tiny_kind_model(GetParam(), 11);
  const std::vector<double> want = run(cpu, tokens, o, "cpu", 100);
  const std::vector<double> got = run(gpu, tokens, o, "cuda", 100);
  expect_close(got, want, 1e-4);
  EXPECT_LT(got.back(), 0.7 * got.front());  // and it learns
}

// Dropout 0.1 on the embedding's and every layer's output: the same masks
// on both devices, so the same curve; and not the curve without dropout.
TEST_P(GpuTrainingKinds, HundredStepsWithDropoutAgreeWithTheCpu) {
  const auto tokens = testing::tiny_tokens(20000);
  TrainOptions o = options(100);
  o.dropout = 0.1;
  LanguageModel cpu = tiny_kind_model(GetParam(), 11), gpu = tiny_kind_model(GetParam(), 11);
  const std::vector<double> want = run(cpu, tokens, o, "cpu", 100);
  const std::vector<double> got = run(gpu, tokens, o, "cuda", 100);
  expect_close(got, want, 1e-4);
  EXPECT_LT(got.back(), 0.7 * got.front());
  LanguageModel plain = tiny_kind_model(GetParam(), 11);
  EXPECT_NE(run(plain, tokens, options(100), "cpu", 3), std::vector<double>(want.begin(), want.begin() + 3));
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuTrainingKinds,
                         ::testing::Values("mamba2", "mamba3_siso", "mamba3_mimo", "hybrid"));

// Mixed precision (products on bf16 tensor cores, F32 weights and
// moments): the loss curve stays within 2% of the F32 one, step by step.
TEST(GpuTraining, Bf16LossCurveFollowsF32) {
  const auto tokens = testing::tiny_tokens(40000);
  const TrainOptions o = options(200);
  LanguageModel f32 = testing::tiny_model(17), bf16 = testing::tiny_model(17);
  const std::vector<double> want = run(f32, tokens, o, "cuda", 200);
  const std::vector<double> got = run(bf16, tokens, o, "cuda", 200, {}, {}, true);
  expect_close(got, want, 0.02);
  EXPECT_NE(got, want);  // the products did change precision
}

// The same for Mamba-3 SISO and MIMO (rank 2: 32 steps a chunk), whose scan
// backward runs its chunk passes on the tensor cores (one TF32 product
// each) when the context rounds its products.
class GpuBf16Kinds : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuBf16Kinds, Bf16LossCurveFollowsF32) {
  const auto tokens = testing::tiny_tokens(40000);
  const TrainOptions o = options(200);
  LanguageModel f32 = tiny_kind_model(GetParam(), 17), bf16 = tiny_kind_model(GetParam(), 17);
  const std::vector<double> want = run(f32, tokens, o, "cuda", 200);
  const std::vector<double> got = run(bf16, tokens, o, "cuda", 200, {}, {}, true);
  expect_close(got, want, 0.02);
  EXPECT_NE(got, want);
  EXPECT_LT(got.back(), 0.7 * got.front());  // and it learns
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuBf16Kinds, ::testing::Values("mamba3_siso", "mamba3_mimo"));

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / cat("ssm_gpu_train_", name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A cuda context computing in bf16, keeping the weights' bf16 copies
// between optimiser steps (ops/cuda/weight_copies.h) unless told not to
// (SSM_CUDA_WEIGHT_COPIES=0, read when the context is made).
std::unique_ptr<Context> bf16_context(bool keep_copies) {
  ::setenv("SSM_CUDA_WEIGHT_COPIES", keep_copies ? "1" : "0", 1);
  auto ctx = std::make_unique<Context>("cuda", 1);
  ::unsetenv("SSM_CUDA_WEIGHT_COPIES");
  EXPECT_TRUE(ctx->resources()->set_bf16_compute(true));
  return ctx;
}

// The kept copies hold the bf16 values a copy at each use would: 12
// --bf16 steps give the same losses to the bit with and without them (and
// the copies were made, or written by the fused AdamW along with the
// weights, and used again within a step).
class GpuBf16WeightCopies : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuBf16WeightCopies, SameLossesAsRoundingAtEveryUse) {
  const auto tokens = testing::tiny_tokens(20000);
  const TrainOptions o = options(12);
  std::vector<double> losses[2];
  for (const bool keep : {false, true}) {
    const auto ctx = bf16_context(keep);
    LanguageModel m = tiny_kind_model(GetParam(), 19);
    m.to_device(ctx->device());
    {
      Trainer t(m, tokens, o, *ctx);
      while (!t.finished()) losses[keep].push_back(t.step().loss);
    }
    const cuda::WeightCopies& copies = cuda::resources(*ctx).weight_copies;
    if (keep) {
      EXPECT_GT(copies.made(), 0);
      EXPECT_GT(copies.reused(), 0);  // the backward's dx, the head's blocks
      EXPECT_GT(copies.updated(), 0);  // written by the fused AdamW
    } else {
      EXPECT_EQ(copies.made() + copies.reused(), 0);
    }
  }
  EXPECT_EQ(losses[1], losses[0]);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuBf16WeightCopies,
                         ::testing::Values("mamba2", "mamba3_siso", "hybrid"));

// Loading a checkpoint rewrites the weights: the copies kept from before
// must not survive it. 3 steps, a checkpoint, 3 steps, a forward (fresh
// copies of the weights the checkpoint then replaces), the checkpoint
// loaded again, 3 steps: the last three losses repeat the middle three.
TEST(GpuBf16WeightCopies, LoadingACheckpointDropsTheCopies) {
  const auto tokens = testing::tiny_tokens(20000);
  const TrainOptions o = options(12);
  const auto ctx = bf16_context(true);
  LanguageModel m = tiny_kind_model("mamba3_siso", 23);
  m.to_device(ctx->device());
  Trainer t(m, tokens, o, *ctx);
  for (int i = 0; i < 3; ++i) t.step();
  const fs::path dir = temp_dir("bf16_copies");
  t.save_checkpoint(dir);
  std::vector<double> first, again;
  for (int i = 0; i < 3; ++i) first.push_back(t.step().loss);
  Tensor ids = Tensor::empty(DType::kI64, {o.batch, o.seq_len});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = tokens[static_cast<size_t>(i)];
  // The forward uses kept copies (the update wrote them: none is made).
  const cuda::WeightCopies& copies = cuda::resources(*ctx).weight_copies;
  const int64_t used = copies.made() + copies.reused();
  model_loss(m, ids, *ctx);
  EXPECT_GT(copies.made() + copies.reused(), used);
  t.load_checkpoint(dir / "checkpoint.safetensors");
  for (int i = 0; i < 3; ++i) again.push_back(t.step().loss);
  EXPECT_EQ(again, first);
  fs::remove_all(dir);
}

// 10 steps on `first`, a checkpoint, 10 more on `second` from it: the same
// losses (1e-4) as 20 steps on the CPU alone.
void resume_across(const std::string& first, const std::string& second, double dropout = 0) {
  const auto tokens = testing::tiny_tokens(20000);
  TrainOptions o = options(20);
  o.dropout = dropout;
  LanguageModel straight = testing::tiny_model(13);
  const std::vector<double> want = run(straight, tokens, o, "cpu", 20);
  const fs::path dir = temp_dir(cat(first, "_", second, "_", dropout));
  LanguageModel a = testing::tiny_model(13);
  std::vector<double> got = run(a, tokens, o, first, 10, dir);
  LanguageModel b(testing::tiny_config());
  b.load_weights(*open_checkpoint(dir));
  const std::vector<double> rest =
      run(b, tokens, o, second, 10, {}, dir / "checkpoint.safetensors");
  got.insert(got.end(), rest.begin(), rest.end());
  expect_close(got, want, 1e-4);
  fs::remove_all(dir);
}

TEST(GpuTraining, AGpuCheckpointResumesOnTheCpu) { resume_across("cuda", "cpu"); }
TEST(GpuTraining, ACpuCheckpointResumesOnTheGpu) { resume_across("cpu", "cuda"); }
TEST(GpuTraining, ADropoutRunResumesAcrossDevices) {
  resume_across("cuda", "cpu", 0.1);
  resume_across("cpu", "cuda", 0.1);
}

}  // namespace
}  // namespace ssm
