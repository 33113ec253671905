// The training loop: the loss falls, the step's activations reuse one
// arena, WSLA touches only its rows, a resumed
// run equals an uninterrupted one bit for bit, bad checkpoints are refused,
// accumulation equals a larger batch, and AdamW / the schedule / the
// initialisation follow their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ssm/io/atomic_file.h"
#include "ssm/train/model_grad.h"
#include "ssm/train/trainer.h"
#include "tiny_model.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

TrainOptions small_options() {
  return TrainOptions{.steps = 6, .batch = 2, .seq_len = 24, .accumulation = 1, .lr = 3e-3,
                      .warmup = 2, .weight_decay = 0.1, .clip = 1.0, .seed = 5};
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / cat("ssm_train_test_", name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::vector<std::vector<float>> snapshot(LanguageModel& m) {
  std::vector<std::vector<float>> out;
  m.for_each_param([&](const std::string&, Param& p) {
    out.emplace_back(p.value.data<float>(), p.value.data<float>() + p.value.numel());
  });
  return out;
}

TEST(Trainer, LossFallsOnAFixedSeed) {
  LanguageModel model = testing::tiny_model(1);
  const auto tokens = testing::tiny_tokens(4000);
  Context ctx(2);
  TrainOptions o = small_options();
  o.steps = 60;
  o.warmup = 5;
  o.lr = 1e-2;
  Trainer trainer(model, tokens, o, ctx);
  std::vector<double> losses;
  while (!trainer.finished()) losses.push_back(trainer.step().loss);
  EXPECT_NEAR(losses.front(), std::log(64.0), 0.3);  // uniform over the vocabulary at init
  double tail = 0;
  for (size_t i = losses.size() - 5; i < losses.size(); ++i) tail += losses[i] / 5;
  EXPECT_LT(tail, 0.6 * losses.front());
}

// The step's activations come from the context's kept arena: sized by the
// first step, then the same bytes every step; recomputing holds only one
// layer's internals at a time, so it needs less.
TEST(Trainer, StepsReuseTheKeptArena) {
  const auto tokens = testing::tiny_tokens(4000);
  size_t kept_bytes[2] = {};
  std::vector<std::vector<float>> weights[2];
  for (const bool recompute : {false, true}) {
    LanguageModel model = testing::tiny_model(1);
    Context ctx(2);
    TrainOptions o = small_options();
    o.recompute = recompute;
    Trainer trainer(model, tokens, o, ctx);
    trainer.step();
    const size_t first = ctx.kept_arena().capacity();
    EXPECT_GT(first, 0u);
    for (int i = 0; i < 3; ++i) {
      trainer.step();
      EXPECT_EQ(ctx.kept_arena().capacity(), first) << "step " << i + 2;
    }
    EXPECT_FALSE(ctx.kept_arena().in_scope());
    kept_bytes[recompute] = ctx.kept_arena().high_water();
    weights[recompute] = snapshot(model);
  }
  EXPECT_LT(kept_bytes[1], kept_bytes[0]);
  EXPECT_EQ(weights[1], weights[0]);  // the same internals, recomputed or kept
}

TEST(Trainer, WslaLeavesEverythingButTheBCRowsBitIdentical) {
  LanguageModel model = testing::tiny_model(2);
  const auto before = snapshot(model);
  const auto tokens = testing::tiny_tokens(2000);
  Context ctx(1);
  TrainOptions o = small_options();
  o.wsla = true;
  o.steps = 3;
  Trainer trainer(model, tokens, o, ctx);
  while (!trainer.finished()) trainer.step();
  const auto after = snapshot(model);
  const Mamba2Config& c = model.config().mamba2;
  const int64_t D = model.config().d_model, r0 = 2 * c.d_inner(), r1 = r0 + 2 * c.ngroups * c.d_state;
  size_t k = 0;
  int changed_rows = 0;
  model.for_each_param([&](const std::string& name, Param&) {
    const bool in_proj = name.find("in_proj.weight") != std::string::npos;
    for (size_t i = 0; i < before[k].size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / D;
      const bool trains = in_proj && row >= r0 && row < r1;
      if (!trains) {
        ASSERT_EQ(std::memcmp(&before[k][i], &after[k][i], sizeof(float)), 0) << name << "[" << i << "]";
      } else if (before[k][i] != after[k][i] && i % D == 0) {
        ++changed_rows;
      }
    }
    ++k;
  });
  EXPECT_GT(changed_rows, (r1 - r0));  // the B/C rows of both layers moved
}

TEST(Trainer, ResumeEqualsUninterruptedTraining) {
  const auto tokens = testing::tiny_tokens(3000);
  const TrainOptions o = small_options();
  Context ctx(2);

  LanguageModel straight = testing::tiny_model(3);
  std::vector<double> expected;
  {
    Trainer t(straight, tokens, o, ctx);
    while (!t.finished()) expected.push_back(t.step().loss);
  }

  const fs::path dir = temp_dir("resume");
  std::vector<double> got;
  {
    LanguageModel first = testing::tiny_model(3);
    Trainer t(first, tokens, o, ctx);
    for (int i = 0; i < 3; ++i) got.push_back(t.step().loss);
    t.save_checkpoint(dir);
  }
  {
    LanguageModel second(testing::tiny_config());
    second.load_weights(*open_checkpoint(dir));
    Trainer t(second, tokens, o, ctx);
    t.load_checkpoint(dir / "checkpoint.safetensors");
    EXPECT_EQ(t.steps_done(), 3);
    while (!t.finished()) got.push_back(t.step().loss);
    EXPECT_EQ(got, expected);  // exactly
    const auto a = snapshot(straight), b = snapshot(second);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_EQ(std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)), 0) << k;
  }
  fs::remove_all(dir);
}

TEST(Trainer, CheckpointCreatesItsDirectoryOrNamesWhyItCannot) {
  const fs::path root = temp_dir("mkdir");
  LanguageModel m = testing::tiny_model(4);
  Context ctx(1);
  const auto tokens = testing::tiny_tokens(2000);  // the Trainer keeps a reference
  Trainer t(m, tokens, small_options(), ctx);
  t.step();
  t.save_checkpoint(root / "new" / "run");  // neither directory exists yet
  EXPECT_TRUE(fs::exists(root / "new" / "run" / "checkpoint.safetensors"));
  EXPECT_TRUE(fs::exists(root / "new" / "run" / "model.safetensors"));

  std::ofstream(root / "file") << "in the way";
  try {
    t.save_checkpoint(root / "file" / "run");
    ADD_FAILURE() << "expected ssm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((root / "file" / "run").string()), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("bad");
    LanguageModel m = testing::tiny_model(4);
    Trainer t(m, tokens_, small_options(), ctx_);
    t.step();
    t.save_checkpoint(dir_);
    bytes_ = read_file(dir_ / "checkpoint.safetensors");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` as a checkpoint and expects a load to fail mentioning
  // `needle`, leaving the model's weights unchanged.
  void expect_refused(const std::string& bytes, const std::string& needle,
                      TrainOptions o = small_options()) {
    const fs::path file = dir_ / "bad.safetensors";
    std::ofstream(file, std::ios::binary) << bytes;
    LanguageModel m = testing::tiny_model(9);
    const auto before = snapshot(m);
    Trainer t(m, tokens_, o, ctx_);
    try {
      t.load_checkpoint(file);
      ADD_FAILURE() << "expected ssm::Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    }
    EXPECT_EQ(snapshot(m), before);
    EXPECT_EQ(t.steps_done(), 0);
  }

  std::vector<int32_t> tokens_ = testing::tiny_tokens(2000);
  Context ctx_{1};
  fs::path dir_;
  std::string bytes_;
};

TEST_F(BadCheckpoint, TruncatedFileIsRefused) {
  expect_refused(bytes_.substr(0, bytes_.size() / 2), "");
  expect_refused(bytes_.substr(0, 5), "");
  expect_refused("", "");
}

TEST_F(BadCheckpoint, DamagedBytesAreRefused) {
  std::string damaged = bytes_;
  damaged[damaged.size() - 3] ^= 0x40;
  expect_refused(damaged, "checksum mismatch");
}

TEST_F(BadCheckpoint, GarbageIsRefused) { expect_refused(std::string(4096, 'x'), ""); }

TEST_F(BadCheckpoint, OtherOptionsAreRefused) {
  TrainOptions o = small_options();
  o.lr *= 2;
  expect_refused(bytes_, "resume with the same options", o);
}

TEST_F(BadCheckpoint, PlainWeightsFileIsNotACheckpoint) {
  expect_refused(read_file(dir_ / "model.safetensors"), "not a training checkpoint");
}

TEST(ModelGrad, AccumulatedHalvesEqualTheWholeBatch) {
  LanguageModel m = testing::tiny_model(6, 64);  // with MLPs
  const auto tokens = testing::tiny_tokens(200);
  Tensor ids = Tensor::empty(DType::kI64, {4, 20});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = tokens[i];
  Context ctx(2);
  Gradients whole(m, true), halves(m, true);
  const double loss = model_loss_and_grad(m, ids, &whole, 1.0, ctx).mean();
  double acc = 0;
  for (int64_t h = 0; h < 2; ++h)
    acc += 0.5 * model_loss_and_grad(m, ids.rows(2 * h, 2 * h + 2), &halves, 0.5, ctx).mean();
  EXPECT_NEAR(acc, loss, 1e-6 * loss);
  for (size_t i = 0; i < whole.size(); ++i)
    for (int64_t k = 0; k < whole.grad(i).numel(); ++k)
      ASSERT_NEAR(whole.grad(i).data<float>()[k], halves.grad(i).data<float>()[k], 1e-5)
          << whole.name(i);
}

TEST(AdamW, FollowsTheDefinitionAndSkipsDecayForNoDecayParams) {
  LanguageModel m = testing::tiny_model(7);
  Gradients g(m, true);
  AdamW opt(m.trainable_parameters(), AdamWOptions{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                                     .weight_decay = 0.2});
  const auto p0 = snapshot(m);
  Context ctx(1);
  std::vector<std::vector<double>> mref(g.size()), vref(g.size()), pref(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    pref[i].assign(p0[i].begin(), p0[i].end());
    mref[i].assign(p0[i].size(), 0.0);
    vref[i].assign(p0[i].size(), 0.0);
  }
  const double lr = 0.01;
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < g.size(); ++i)
      for (int64_t k = 0; k < g.grad(i).numel(); ++k)
        g.grad(i).data<float>()[k] = static_cast<float>(std::sin(0.1 * k + step + i));
    opt.step(g, lr, ctx);
    for (size_t i = 0; i < g.size(); ++i) {
      const double wd = g.param(i).role == ParamRole::kWeight ? 0.2 : 0.0;
      for (size_t k = 0; k < pref[i].size(); ++k) {
        const double gr = g.grad(i).data<float>()[k];
        mref[i][k] = 0.9 * mref[i][k] + 0.1 * gr;
        vref[i][k] = 0.95 * vref[i][k] + 0.05 * gr * gr;
        const double mh = mref[i][k] / (1 - std::pow(0.9, step)), vh = vref[i][k] / (1 - std::pow(0.95, step));
        pref[i][k] = pref[i][k] * (1 - lr * wd) - lr * mh / (std::sqrt(vh) + 1e-8);
      }
    }
  }
  const auto p3 = snapshot(m);
  for (size_t i = 0; i < g.size(); ++i)
    for (size_t k = 0; k < pref[i].size(); ++k)
      ASSERT_NEAR(p3[i][k], pref[i][k], 1e-6) << g.name(i) << "[" << k << "]";
}

TEST(Clipping, ScalesToTheMaximumNorm) {
  LanguageModel m = testing::tiny_model(8);
  Gradients g(m, true);
  for (size_t i = 0; i < g.size(); ++i)
    for (int64_t k = 0; k < g.grad(i).numel(); ++k) g.grad(i).data<float>()[k] = 0.5f;
  const auto slices = m.trainable_parameters();
  Context ctx(1);
  const double norm = clip_grad_norm(slices, g, 1.5, ctx);
  EXPECT_NEAR(norm, 0.5 * std::sqrt(static_cast<double>(m.parameter_count())), 1e-3);
  EXPECT_NEAR(global_grad_norm(slices, g, ctx), 1.5, 1e-4);
}

TEST(Schedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  const LrSchedule s{.peak = 2.0, .warmup = 4, .total = 24, .min_ratio = 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.at(3), 2.0);
  EXPECT_DOUBLE_EQ(s.at(4), 2.0);
  EXPECT_NEAR(s.at(14), 0.2 + 1.8 * 0.5, 1e-12);  // half way down the cosine
  EXPECT_NEAR(s.at(24), 0.2, 1e-12);
  EXPECT_NEAR(s.at(100), 0.2, 1e-12);
  for (int64_t t = 4; t < 24; ++t) EXPECT_GT(s.at(t), s.at(t + 1));
}

TEST(Init, FollowsTheReferenceDistributionsAndTheSeed) {
  LanguageModel a = testing::tiny_model(11), b = testing::tiny_model(11), c = testing::tiny_model(12);
  EXPECT_EQ(snapshot(a), snapshot(b));
  EXPECT_NE(snapshot(a), snapshot(c));
  const Mamba2Config& mc = a.config().mamba2;
  a.for_each_param([&](const std::string& name, Param& p) {
    const float* v = p.value.data<float>();
    const int64_t n = p.value.numel();
    double mean = 0, sq = 0, mx = 0;
    for (int64_t i = 0; i < n; ++i) {
      mean += v[i] / n;
      sq += double(v[i]) * v[i] / n;
      mx = std::max(mx, std::abs(double(v[i])));
    }
    if (name.find("embedding") != std::string::npos) {
      EXPECT_NEAR(std::sqrt(sq - mean * mean), 0.02, 0.002) << name;
    } else if (name.find("in_proj.weight") != std::string::npos) {
      EXPECT_LE(mx, 1 / std::sqrt(double(p.shape[1])));
      EXPECT_GT(mx, 0.9 / std::sqrt(double(p.shape[1])));
    } else if (name.find("out_proj.weight") != std::string::npos) {
      const double bound = 1 / std::sqrt(double(p.shape[1])) / std::sqrt(2.0);  // n_layer = 2
      EXPECT_LE(mx, bound);
      EXPECT_GT(mx, 0.9 * bound);
    } else if (name.find("dt_bias") != std::string::npos) {
      for (int64_t i = 0; i < n; ++i) {
        const double dt = std::log1p(std::exp(double(v[i])));
        EXPECT_GE(dt, mc.dt_min * 0.999);
        EXPECT_LE(dt, mc.dt_max * 1.001);
      }
    } else if (name.find("A_log") != std::string::npos) {
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_GE(std::exp(v[i]), 1.0 - 1e-6);
        EXPECT_LE(std::exp(v[i]), 16.0 + 1e-5);
      }
    } else if (name.find("norm") != std::string::npos || name.ends_with(".D")) {
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v[i], 1.f) << name;
    }
  });
}

}  // namespace
}  // namespace ssm
