// Training a model whose projections are BF16 or F16 (a 16-bit checkpoint
// loaded as stored): the Trainer widens them to F32 master weights, so the
// run equals, bit for bit, the F32 run of the same values; Q8 projections
// are refused, naming the parameter.
#include <gtest/gtest.h>

#include <cstring>

#include "ssm/train/trainer.h"
#include "tiny_model.h"

namespace ssm {
namespace {

TrainOptions options(bool wsla) {
  return TrainOptions{.steps = 3, .batch = 2, .seq_len = 16, .lr = 3e-3, .warmup = 0, .seed = 4,
                      .wsla = wsla};
}

bool is_projection(const Param& p) { return p.role == ParamRole::kWeight && p.shape.size() == 2; }

// F32 to the nearest BF16, ties to even, written out on the bits (no NaN in
// an initialised model): independent of the engine's conversion.
float bf16_rounded(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

std::vector<std::vector<float>> values(LanguageModel& m) {
  std::vector<std::vector<float>> out;
  m.for_each_param([&](const std::string& name, Param& p) {
    EXPECT_EQ(p.value.dtype(), DType::kF32) << name;
    out.emplace_back(p.value.data<float>(), p.value.data<float>() + p.value.numel());
  });
  return out;
}

std::vector<double> train(LanguageModel& model, bool wsla) {
  const auto tokens = testing::tiny_tokens(2000);
  Context ctx(2);
  Trainer trainer(model, tokens, options(wsla), ctx);
  std::vector<double> losses;
  while (!trainer.finished()) losses.push_back(trainer.step().loss);
  return losses;
}

TEST(LowPrecisionMasterWeights, Bf16ProjectionsTrainAsTheirF32Values) {
  for (const bool wsla : {false, true}) {
    LanguageModel stored = testing::tiny_model(3);
    stored.convert_projections(DType::kBF16);
    LanguageModel f32 = testing::tiny_model(3);
    f32.for_each_param([](const std::string&, Param& p) {
      if (!is_projection(p)) return;
      float* v = p.value.data<float>();
      for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = bf16_rounded(v[i]);
    });
    const std::vector<double> expected = train(f32, wsla);
    EXPECT_EQ(train(stored, wsla), expected) << "wsla " << wsla;
    EXPECT_EQ(stored.projection_dtype(), DType::kF32);
    EXPECT_EQ(values(stored), values(f32)) << "wsla " << wsla;
  }
}

TEST(LowPrecisionMasterWeights, F16ProjectionsWidenExactly) {
  LanguageModel stored = testing::tiny_model(7);
  stored.convert_projections(DType::kF16);
  // The F32 model holding the F16 values, widened before any training.
  LanguageModel f32 = testing::tiny_model(7);
  std::vector<Tensor> halves;
  stored.for_each_param([&](const std::string&, Param& p) {
    if (is_projection(p)) halves.push_back(p.value.to_dtype(DType::kF32));
  });
  size_t next = 0;
  f32.for_each_param([&](const std::string&, Param& p) {
    if (is_projection(p)) p.value = halves.at(next++);
  });
  EXPECT_EQ(train(stored, false), train(f32, false));
  EXPECT_EQ(values(stored), values(f32));
}

TEST(LowPrecisionMasterWeights, Q8ProjectionsAreRefused) {
  LanguageModel model = testing::tiny_model(3);
  model.convert_projections(DType::kQ8);
  const auto tokens = testing::tiny_tokens(2000);
  Context ctx(1);
  try {
    Trainer trainer(model, tokens, options(false), ctx);
    FAIL() << "a Q8 model trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training needs F32 master weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssm
