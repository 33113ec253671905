// ops::dropout and dropout_backward on every backend: bit for bit the mask
// of a scalar transcription of its definition (splitmix64 run as a
// generator, ops/dropout_mask.h) times float(1 / (1 - p)), in wider rows
// (the padding untouched); the kept fraction within binomial bounds; the
// backward the same mask over dy; p = 0 the identity.
#include "ssm/ops/dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "ops/against_ref.h"
#include "ops/op_test_support.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::random_tensor;

// splitmix64 (Steele, Lea and Flood), one output per call.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};
uint64_t first_output(uint64_t seed) { return SplitMix64{seed}.next(); }

// keep[i] for i < n: the generator seeded with the draw's key, output i + 1.
std::vector<bool> reference_mask(double p, uint64_t seed, uint64_t step, uint64_t site, int64_t n) {
  SplitMix64 g{first_output(first_output(first_output(seed) ^ step) ^ site)};
  const auto threshold = static_cast<uint64_t>(std::floor(p * 4294967296.0));
  std::vector<bool> keep(n);
  for (int64_t i = 0; i < n; ++i) keep[i] = (g.next() >> 32) >= threshold;
  return keep;
}

// x (rows of cols) with the reference mask applied; float products.
Tensor reference_dropout(const Tensor& x, double p, uint64_t seed, uint64_t step, uint64_t site) {
  const std::vector<bool> keep = reference_mask(p, seed, step, site, x.numel());
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data<float>()[i] = keep[i] ? x.data<float>()[i] * scale : 0.f;
  return y;
}

class DropoutTest : public ::testing::TestWithParam<std::string> {};

const std::pair<int64_t, int64_t> kSizes[] = {{1, 1}, {7, 33}, {300, 128}};

TEST_P(DropoutTest, ForwardAndBackwardAreTheHashedMaskTimesTheScaleInWiderRows) {
  for (const bool backward : {false, true})
    for (const double p : {0.1, 0.5, 0.9})
      for (const auto& [R, C] : kSizes) {
        const Tensor x = random_tensor({R, C}, R * 31 + C, -2.f, 2.f);
        const uint64_t seed = 12345, step = 77, site = 3;
        Context ctx(GetParam(), 2);
        const auto b = in_block(ctx, x, true, 3, 2);
        Tensor want = testing::host(b.rows).clone();
        const Tensor dropped = reference_dropout(x, p, seed, step, site);
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c)
            want.data<float>()[r * (C + 5) + 3 + c] = dropped.data<float>()[r * C + c];
        const ops::DropoutArgs args{.t = b.view, .p = p, .seed = seed, .step = step, .site = site};
        if (backward)
          ops::dropout_backward(ctx, args);
        else
          ops::dropout(ctx, args);
        EXPECT_TRUE(testing::identical(b.rows, want))
            << (backward ? "backward" : "forward") << " p " << p << " " << R << "x" << C;
      }
}

TEST_P(DropoutTest, KeptFractionIsWithinBinomialBounds) {
  Context ctx(GetParam(), 2);
  const int64_t R = 300, C = 128, n = R * C;
  for (const double p : {0.05, 0.1, 0.3, 0.5}) {
    Tensor ones = Tensor::zeros(DType::kF32, {R, C});
    for (int64_t i = 0; i < n; ++i) ones.data<float>()[i] = 1.f;
    const Tensor t = testing::on(ctx, ones);
    ops::dropout(ctx, {.t = t, .p = p, .seed = 5, .step = 0, .site = 1});
    const Tensor h = testing::host(t);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) kept += h.data<float>()[i] != 0.f;
    // Six standard deviations: a fixed seed, so this is a check of the
    // hash's uniformity, not a draw that may fail.
    const double mean = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
    EXPECT_LE(std::abs(static_cast<double>(kept) - mean), 6 * sd) << "p " << p << " kept " << kept;
  }
}

TEST_P(DropoutTest, BackwardIsTheForwardsMaskTimesDyOverOneMinusP) {
  Context ctx(GetParam(), 2);
  const double p = 0.25;
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const Tensor x =
      random_tensor({13, 57}, 3, 0.5f, 2.f);  // never zero: zero marks a dropped element
  const Tensor dy = random_tensor({13, 57}, 4);
  const ops::DropoutArgs forward{.t = testing::on(ctx, x), .p = p, .seed = 9, .step = 4, .site = 2};
  ops::dropout(ctx, forward);
  const Tensor d = testing::on(ctx, dy);
  ops::dropout_backward(ctx, {.t = d, .p = p, .seed = 9, .step = 4, .site = 2});
  const Tensor y = testing::host(forward.t), dx = testing::host(d);
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = y.data<float>()[i] != 0.f;
    dropped += !keep;
    EXPECT_EQ(dx.data<float>()[i], keep ? dy.data<float>()[i] * scale : 0.f) << i;
  }
  EXPECT_GT(dropped, 0);
}

TEST_P(DropoutTest, ZeroProbabilityIsTheIdentity) {
  Context ctx(GetParam(), 2);
  const Tensor x = random_tensor({9, 40}, 8);
  const Tensor t = testing::on(ctx, x);
  ops::dropout(ctx, {.t = t, .p = 0.0, .seed = 1, .step = 2, .site = 3});
  EXPECT_TRUE(testing::identical(t, x));
}

TEST_P(DropoutTest, EachOfSeedStepAndSiteDrawsAnotherMask) {
  Context ctx(GetParam(), 1);
  const Tensor x = random_tensor({4, 64}, 6, 0.5f, 1.f);
  auto run = [&](uint64_t seed, uint64_t step, uint64_t site) {
    const Tensor t = testing::on(ctx, x);
    ops::dropout(ctx, {.t = t, .p = 0.5, .seed = seed, .step = step, .site = site});
    return testing::host(t);
  };
  const Tensor base = run(1, 2, 3);
  EXPECT_TRUE(testing::identical(run(1, 2, 3), base));
  EXPECT_FALSE(testing::identical(run(2, 2, 3), base));
  EXPECT_FALSE(testing::identical(run(1, 3, 3), base));
  EXPECT_FALSE(testing::identical(run(1, 2, 4), base));
}

TEST_P(DropoutTest, RefusesAProbabilityOutsideZeroToOne) {
  Context ctx(GetParam(), 1);
  const Tensor t = testing::on(ctx, random_tensor({2, 8}, 1));
  for (const double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    EXPECT_THROW(ops::dropout(ctx, {.t = t, .p = p}), Error) << p;
    EXPECT_THROW(ops::dropout_backward(ctx, {.t = t, .p = p}), Error) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DropoutTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
