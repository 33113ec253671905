// Training's residual dropout (ResidualDropout, TrainOptions::dropout): the
// model gradient with dropout on against centred finite differences of the
// loss under the same masks; a resumed run with dropout equals an
// unbroken one bit for bit; a mask is a function of (seed, step), and
// inference never drops; bad probabilities and unsupported blocks refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "ssm/train/model_grad.h"
#include "ssm/train/trainer.h"
#include "support/compare.h"
#include "support/random.h"
#include "tiny_model.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

// A tiny Mamba-3 SISO model (the default model's mixer), without MLPs.
LanguageModel tiny_mamba3(uint64_t seed) {
  const Json j = {{"d_model", 32},
                  {"n_layer", 2},
                  {"vocab_size", 64},
                  {"pad_vocab_size_multiple", 8},
                  {"d_intermediate", 0},
                  {"ssm_cfg",
                   {{"layer", "Mamba3"},
                    {"d_state", 8},
                    {"headdim", 8},
                    {"expand", 2},
                    {"chunk_size", 8},
                    {"rope_fraction", 0.5}}},
                  {"tie_embeddings", true},
                  {"attn_layer_idx", Json::array()},
                  {"attn_cfg", Json::object()}};
  LanguageModel m(parse_model_config(j, "tiny mamba3 test config"));
  initialize_model(m, seed);
  return m;
}

Tensor tiny_ids(int64_t B, int64_t L) {
  const auto tokens = testing::tiny_tokens(B * L + 7);
  Tensor ids = Tensor::empty(DType::kI64, {B, L});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = tokens[i + 7];
  return ids;
}

// Every parameter tensor's gradient with dropout on, along its own direction
// and a random one, against (L(w + hv) - L(w - hv)) / 2h with the same
// masks (the same seed and step), the best of four steps (see
// hf_families_grad_test.cpp), relative to the tensor's gradient norm.
void expect_gradient_matches_fd(LanguageModel& model, const std::string& backend) {
  const Tensor ids = tiny_ids(2, 16);
  const ResidualDropout drop{.p = 0.3, .seed = 11, .step = 4};
  Context ctx(backend, backend == "ref" ? 1 : 2);
  Gradients grads(model, true);
  const double loss =
      model_loss_and_grad(model, ids, &grads, 1.0, ctx, nullptr, false, nullptr, drop).mean();
  EXPECT_NE(loss, model_loss(model, ids, ctx).mean());                 // it did drop
  EXPECT_EQ(loss, model_loss(model, ids, ctx, nullptr, drop).mean());  // the same masks again
  const double steps[] = {1e-2, 5e-3, 2.5e-3, 1e-3};
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor g = grads.grad(i);
    Tensor& value = grads.param(i).value;
    const int64_t n = g.numel();
    double norm = 0;
    for (int64_t j = 0; j < n; ++j)
      norm += static_cast<double>(g.data<float>()[j]) * g.data<float>()[j];
    norm = std::sqrt(norm);
    for (int direction = 0; direction < 2; ++direction) {
      std::vector<float> v = testing::random_vector(n, 500 + i * 3 + direction);
      if (direction == 0 && norm > 0)
        for (int64_t j = 0; j < n; ++j) v[j] = g.data<float>()[j];
      double vn = 0, want = 0;
      for (float x : v) vn += static_cast<double>(x) * x;
      for (int64_t j = 0; j < n; ++j) {
        v[j] = static_cast<float>(v[j] / std::sqrt(vn));
        want += static_cast<double>(g.data<float>()[j]) * v[j];
      }
      const Tensor keep = value.clone();
      auto loss_at = [&](double h) {
        for (int64_t j = 0; j < n; ++j)
          value.data<float>()[j] = static_cast<float>(keep.data<float>()[j] + h * v[j]);
        return model_loss(model, ids, ctx, nullptr, drop).mean();
      };
      double err = INFINITY;
      for (double h : steps)
        err = std::min(
            err, std::abs((loss_at(h) - loss_at(-h)) / (2 * h) - want) / std::max(norm, 1e-3));
      std::memcpy(value.raw(), keep.raw(), keep.nbytes());
      EXPECT_LE(err, 1e-2) << grads.name(i) << " direction " << direction << ", |g| " << norm;
    }
  }
}

class DropoutGrad : public ::testing::TestWithParam<std::string> {};

TEST_P(DropoutGrad, Mamba2WithMlpsMatchesFiniteDifferences) {
  LanguageModel m = testing::tiny_model(21, 64);
  expect_gradient_matches_fd(m, GetParam());
}

TEST_P(DropoutGrad, Mamba3SisoMatchesFiniteDifferences) {
  LanguageModel m = tiny_mamba3(22);
  expect_gradient_matches_fd(m, GetParam());
}

INSTANTIATE_TEST_SUITE_P(HostBackends, DropoutGrad, ::testing::Values("ref", "cpu"),
                         [](const auto& info) { return info.param; });

TEST(Dropout, MasksFollowSeedAndStepAndNeverReachInference) {
  LanguageModel m = testing::tiny_model(23, 64);
  const Tensor ids = tiny_ids(2, 16);
  Context ctx(2);
  auto loss = [&](const ResidualDropout& d) { return model_loss(m, ids, ctx, nullptr, d).mean(); };
  const double plain = loss({});
  EXPECT_EQ(loss({.p = 0, .seed = 3, .step = 9}), plain);  // p = 0: the old path
  const double a = loss({.p = 0.2, .seed = 3, .step = 9});
  EXPECT_NE(a, plain);
  EXPECT_EQ(loss({.p = 0.2, .seed = 3, .step = 9}), a);
  EXPECT_NE(loss({.p = 0.2, .seed = 3, .step = 10}), a);
  EXPECT_NE(loss({.p = 0.2, .seed = 4, .step = 9}), a);
  // The forward of inference (no tape) never drops.
  const Tensor logits = m.forward(ids, nullptr, ctx);
  EXPECT_EQ(loss({}), plain);
  EXPECT_TRUE(logits.defined());
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / cat("ssm_dropout_test_", name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TrainOptions dropout_options() {
  return TrainOptions{.steps = 6,
                      .batch = 2,
                      .seq_len = 24,
                      .accumulation = 2,
                      .lr = 3e-3,
                      .warmup = 2,
                      .weight_decay = 0.1,
                      .clip = 1.0,
                      .seed = 5,
                      .dropout = 0.2};
}

// Steps 1-3, a checkpoint, steps 4-6 in a fresh trainer: the losses and
// weights of six unbroken steps, bit for bit, and not those without dropout.
TEST(Dropout, ResumeEqualsUninterruptedTraining) {
  const auto tokens = testing::tiny_tokens(3000);
  const TrainOptions o = dropout_options();
  Context ctx(2);
  LanguageModel straight = testing::tiny_model(3, 64);
  std::vector<double> expected;
  {
    Trainer t(straight, tokens, o, ctx);
    while (!t.finished()) expected.push_back(t.step().loss);
  }
  {
    TrainOptions none = o;
    none.dropout = 0;
    LanguageModel m = testing::tiny_model(3, 64);
    Trainer t(m, tokens, none, ctx);
    std::vector<double> losses;
    while (!t.finished()) losses.push_back(t.step().loss);
    EXPECT_NE(losses, expected);
    EXPECT_TRUE(std::isfinite(expected.back()));
  }
  const fs::path dir = temp_dir("resume");
  std::vector<double> got;
  {
    LanguageModel first = testing::tiny_model(3, 64);
    Trainer t(first, tokens, o, ctx);
    for (int i = 0; i < 3; ++i) got.push_back(t.step().loss);
    t.save_checkpoint(dir);
  }
  EXPECT_EQ(read_checkpoint_options(dir / "checkpoint.safetensors").dropout, o.dropout);
  LanguageModel second(testing::tiny_config(64));
  second.load_weights(*open_checkpoint(dir));
  {
    Trainer t(second, tokens, o, ctx);
    t.load_checkpoint(dir / "checkpoint.safetensors");
    while (!t.finished()) got.push_back(t.step().loss);
  }
  EXPECT_EQ(got, expected);  // exactly
  std::vector<const Tensor*> a, b;
  straight.for_each_param([&](const std::string&, Param& p) { a.push_back(&p.value); });
  second.for_each_param([&](const std::string&, Param& p) { b.push_back(&p.value); });
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(std::memcmp(a[k]->raw(), b[k]->raw(), a[k]->nbytes()), 0) << k;
  // Another dropout is another run: its checkpoint is refused.
  TrainOptions other = o;
  other.dropout = 0.3;
  LanguageModel third = testing::tiny_model(3, 64);
  Trainer t(third, tokens, other, ctx);
  EXPECT_THROW(t.load_checkpoint(dir / "checkpoint.safetensors"), Error);
  fs::remove_all(dir);
}

TEST(Dropout, TrainerRefusesAProbabilityOutsideZeroToOne) {
  const auto tokens = testing::tiny_tokens(1000);
  Context ctx(1);
  for (const double p : {-0.1, 1.0, 2.0, std::nan("")}) {
    LanguageModel m = testing::tiny_model(1);
    TrainOptions o = dropout_options();
    o.dropout = p;
    EXPECT_THROW(Trainer(m, tokens, o, ctx), Error) << p;
  }
}

// Falcon-H1's parallel blocks and Zamba2's shared ones have no dropout
// sites yet: refused by name, not trained without it silently.
TEST(Dropout, BlocksWithoutDropoutAreRefused) {
  for (const char* name : {"falcon_h1_hf", "zamba2_hf"}) {
    LanguageModel model = LanguageModel::load(testing::golden_dir(std::string("models/") + name));
    Context ctx(1);
    Gradients grads(model);
    const Tensor ids = tiny_ids(1, 8);
    try {
      model_loss_and_grad(model, ids, &grads, 1.0, ctx, nullptr, false, nullptr, {.p = 0.1});
      ADD_FAILURE() << name << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dropout"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ssm
