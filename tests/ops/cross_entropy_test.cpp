// head_cross_entropy on every backend against ref: heads with padded rows
// beyond the vocabulary, rows without a target, f and df as column blocks,
// dhead accumulated (and left out), the loss alone equal to the loss with
// gradients, one row, several blocks of rows on a large vocabulary, 1 and 2
// threads. ref in float64: its loss against log-sum-exp written out here,
// its df and dhead against centred differences of its loss.
#include "ops/ref/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "op_test_support.h"
#include "ssm/ops/cross_entropy.h"

namespace ssm {
namespace {

using testing::Block;

struct Case {
  const char* name;
  int64_t rows, D, V, padded;
  bool strided;
};
const Case kCases[] = {
    {"padded_head", 11, 6, 13, 16, false},
    {"column_blocks", 23, 9, 40, 40, true},
    {"one_row", 1, 5, 7, 8, false},
    {"wide_rows", 70, 64, 100, 128, true},
    // Too few rows for two threads: the cpu kernel splits the vocabulary.
    {"few_rows_large_vocabulary", 5, 16, 300, 320, true},
    // A vocabulary not a multiple of 8 in a head without padding rows: the
    // cuda kernel cannot pad its products to whole 16-byte pieces.
    {"odd_vocabulary_unpadded_head", 9, 6, 13, 13, true},
};
// More rows than the cpu kernel's block of logits: about 4M (16 rows here,
// three blocks) on its portable path; 16M on its AVX-512 path (62 rows here:
// a block of 62 rows is not a whole number of the kernel's 16-row tiles,
// and in the second case blocks of 128 rows, the last one partial).
const Case kSeveralBlocks[] = {{"several_row_blocks", 37, 2, 270000, 270001, false},
                               {"several_row_blocks_avx512", 150, 2, 270000, 270001, true},
                               {"several_64_row_blocks", 300, 3, 100000, 100000, true}};

// Targets r * 5 mod V, none on every fourth row.
Tensor make_targets(int64_t rows, int64_t V) {
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[r] = r % 4 == 3 ? -1 : (r * 5) % V;
  return testing::i64_tensor(t);
}

struct Inputs {
  int64_t V;
  Block f, df;
  Tensor head, dhead, targets;
};

Inputs make_inputs(const Case& c) {
  const int64_t off = c.strided ? 2 : 0, pad = c.strided ? 5 : 0;
  return {.V = c.V,
          .f = testing::random_block({c.rows, c.D}, off, pad, 1),
          .df = testing::random_block({c.rows, c.D}, pad / 2, pad, 2),
          .head = testing::random_tensor({c.padded, c.D}, 3, -2.f, 2.f),
          .dhead = testing::random_tensor({c.padded, c.D}, 4),  // added to
          .targets = make_targets(c.rows, c.V)};
}

struct Outputs {
  double loss;
  Tensor df, dhead, row_loss;
};

Outputs run(Context& ctx, const Inputs& in, double grad_scale, bool want_dhead = true) {
  const Block df = on(ctx, in.df);
  const Tensor dhead = want_dhead ? testing::on(ctx, in.dhead) : Tensor();
  const Tensor row_loss = Tensor::zeros(DType::kF64, {in.targets.numel()});
  const double loss = ops::head_cross_entropy(ctx, {.vocab = in.V,
                                                    .f = on(ctx, in.f).view(),
                                                    .head = testing::on(ctx, in.head),
                                                    .targets = in.targets,
                                                    .grad_scale = grad_scale,
                                                    .df = df.view(),
                                                    .dhead = dhead,
                                                    .row_loss = row_loss});
  return {loss, testing::host(df.wide), testing::host(dhead), row_loss};
}

class HeadCrossEntropy : public ::testing::TestWithParam<std::string> {};

void expect_matches_ref(const std::string& backend, const Case& c, std::vector<int> thread_counts) {
  SCOPED_TRACE(c.name);
  const Inputs in = make_inputs(c);
  Context ref("ref", 1);
  const Outputs want = run(ref, in, 0.37);
  for (int threads : thread_counts) {
    Context ctx(backend, threads);
    const Outputs got = run(ctx, in, 0.37);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << threads << " threads";
    EXPECT_TRUE(testing::close(got.row_loss, want.row_loss));
    EXPECT_TRUE(testing::close(got.df, want.df));
    // Padded rows beyond V keep what they held.
    EXPECT_TRUE(testing::close(got.dhead, want.dhead));
    EXPECT_TRUE(testing::identical(got.dhead.rows(c.V, c.padded), in.dhead.rows(c.V, c.padded)));
  }
}

TEST_P(HeadCrossEntropy, MatchesRef) {
  for (const Case& c : kCases) expect_matches_ref(GetParam(), c, {1, 2});
}

TEST_P(HeadCrossEntropy, MatchesRefOverSeveralBlocksOfRows) {
  for (const Case& c : kSeveralBlocks) expect_matches_ref(GetParam(), c, {2});
}

TEST_P(HeadCrossEntropy, LossAloneEqualsLossWithGradientsAndTouchesNothing) {
  const Inputs in = make_inputs(kCases[1]);
  Context ctx(GetParam(), 2);
  const Outputs with = run(ctx, in, 0.5);
  const Outputs alone = run(ctx, in, 0.0);
  EXPECT_EQ(alone.loss, with.loss);
  EXPECT_TRUE(testing::identical(alone.df, in.df.wide));
  EXPECT_TRUE(testing::identical(alone.dhead, in.dhead));
  // Without dhead the other results stay as they were.
  const Outputs no_dhead = run(ctx, in, 0.5, false);
  EXPECT_EQ(no_dhead.loss, with.loss);
  EXPECT_TRUE(testing::identical(no_dhead.df, with.df));
}

// The sum left in device memory (sum_out, for training's steps that do not
// wait) is the returned sum to the bit, with the same gradients.
TEST_P(HeadCrossEntropy, SumOutHoldsTheReturnedSum) {
  for (const Case& c : {kCases[1], kSeveralBlocks[2]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c);
    Context ctx(GetParam(), 2);
    const Outputs want = run(ctx, in, 0.5);
    const Block df = on(ctx, in.df);
    const Tensor dhead = testing::on(ctx, in.dhead);
    const Tensor sum = testing::on(ctx, Tensor::zeros(DType::kF64, {1}));
    const double returned = ops::head_cross_entropy(ctx, {.vocab = in.V,
                                                          .f = on(ctx, in.f).view(),
                                                          .head = testing::on(ctx, in.head),
                                                          .targets = in.targets,
                                                          .grad_scale = 0.5,
                                                          .df = df.view(),
                                                          .dhead = dhead,
                                                          .sum_out = sum});
    EXPECT_EQ(returned, 0.0);
    EXPECT_EQ(testing::host(sum).data<double>()[0], want.loss);
    EXPECT_TRUE(testing::identical(testing::host(df.wide), want.df));
    EXPECT_TRUE(testing::identical(testing::host(dhead), want.dhead));
  }
}

TEST_P(HeadCrossEntropy, RowsWithoutTargetsLoseNothingAndGetNoGradient) {
  Inputs in = make_inputs(kCases[0]);
  in.targets = testing::i64_tensor(std::vector<int64_t>(11, -1));
  Context ctx(GetParam(), 1);
  const Outputs got = run(ctx, in, 1.0);
  EXPECT_EQ(got.loss, 0.0);
  EXPECT_TRUE(testing::identical(got.df, Tensor::zeros(DType::kF32, {11, 6})));
  EXPECT_TRUE(testing::identical(got.dhead, in.dhead));
}

// Targets already on the backend's device (a training step queues them
// there, so that a recorded step reads them from one buffer) give the
// results of targets on the host to the bit. On a GPU the op's checks
// refused them ("targets must be on the host") before they took the
// device's; on the host backends they are the host targets.
TEST_P(HeadCrossEntropy, TargetsOnTheDeviceGiveTheSameResults) {
  for (const Case& c : {kCases[0], kCases[1], kSeveralBlocks[2]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c);
    Context ctx(GetParam(), 1);
    const Outputs want = run(ctx, in, 0.5);
    Inputs on_device = in;
    on_device.targets = testing::on(ctx, in.targets);
    ASSERT_EQ(on_device.targets.device(), ctx.device());
    const Outputs got = run(ctx, on_device, 0.5);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_TRUE(testing::identical(got.row_loss, want.row_loss));
    EXPECT_TRUE(testing::identical(got.df, want.df));
    EXPECT_TRUE(testing::identical(got.dhead, want.dhead));
  }
}

// A target outside the vocabulary: refused on the host; on a device, where
// the targets are not read back to be checked, the row counts as one
// without a target instead of reading past its logits.
TEST_P(HeadCrossEntropy, ATargetOutsideTheVocabularyIsRefusedOrNoTarget) {
  const Case& c = kCases[0];
  const Inputs in = make_inputs(c);
  Context ctx(GetParam(), 1);
  Inputs bad = in, none = in;
  bad.targets = in.targets.clone();
  none.targets = in.targets.clone();
  bad.targets.data<int64_t>()[2] = c.V + 1000;
  none.targets.data<int64_t>()[2] = -1;
  if (ctx.device().is_host()) {
    EXPECT_THROW(run(ctx, bad, 0.5), Error);
    return;
  }
  bad.targets = testing::on(ctx, bad.targets);
  const Outputs want = run(ctx, none, 0.5), got = run(ctx, bad, 0.5);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_TRUE(testing::identical(got.row_loss, want.row_loss));
  EXPECT_TRUE(testing::identical(got.df, want.df));
  EXPECT_TRUE(testing::identical(got.dhead, want.dhead));
}

// The 130m bench model's head at one sequence of 2048 (V = 50277 in 50288
// rows; D cut to 64 so that the check stays quick), where the cuda kernel
// pads its products to 50280 columns: in F32 and under bf16 compute (its
// products' inputs rounded: bf16's tolerance), against the cpu backend (ref
// takes minutes here; cpu is checked against ref above). GPU builds only.
TEST_P(HeadCrossEntropy, MatchesCpuAtTheBenchVocabulary) {
  if (!testing::kGpuTests) GTEST_SKIP() << "a GPU test";
  const Inputs in = make_inputs({"bench_vocabulary", 2048, 64, 50277, 50288, true});
  Context cpu("cpu", 8);
  const Outputs want = run(cpu, in, 1.0 / 2048);
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 compute" : "F32");
    Context ctx(GetParam(), 1);
    BackendResources* r = ctx.resources();
    if (bf16 && !(r && r->set_bf16_compute(true))) continue;
    const Outputs got = run(ctx, in, 1.0 / 2048);
    const testing::Tolerance tol = bf16 ? testing::tolerance_for(DType::kBF16) : testing::Tolerance{};
    EXPECT_NEAR(got.loss, want.loss, (bf16 ? 1e-3 : 1e-5) * want.loss);
    EXPECT_TRUE(testing::close(got.row_loss, want.row_loss, tol));
    EXPECT_TRUE(testing::close(got.df, want.df, tol));
    EXPECT_TRUE(testing::close(got.dhead, want.dhead, tol));
    EXPECT_TRUE(testing::identical(got.dhead.rows(50277, 50288), in.dhead.rows(50277, 50288)));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HeadCrossEntropy, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

TEST(HeadCrossEntropyRef, LossIsLogSumExpAndGradientsMatchFiniteDifferences) {
  const int64_t rows = 11, D = 6, V = 13, padded = 16;
  const double scale = 0.37;
  Tensor f = testing::to_f64(testing::random_tensor({rows, D}, 16, -2.f, 2.f));
  Tensor head = testing::to_f64(testing::random_tensor({padded, D}, 17, -2.f, 2.f));
  const Tensor targets = make_targets(rows, V);
  double want = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets.data<int64_t>()[r];
    if (t < 0) continue;
    std::vector<double> logit(V, 0.0);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t d = 0; d < D; ++d)
        logit[v] += f.data<double>()[r * D + d] * head.data<double>()[v * D + d];
    double sum = 0;
    for (double l : logit) sum += std::exp(l);  // small logits: no shift needed
    want += std::log(sum) - logit[t];
  }
  Context ctx("ref", 1);
  Arena::Scope scope(ctx.arena());
  auto J = [&] {
    return scale * ref::head_cross_entropy<double>(
                       ctx, {.vocab = V, .f = f, .head = head, .targets = targets});
  };
  EXPECT_NEAR(J() / scale, want, 1e-12 * want);
  const Tensor gf = testing::fd_gradient(f, J), ghead = testing::fd_gradient(head, J);
  const Tensor df = Tensor::zeros(DType::kF64, {rows, D}),
               dhead = Tensor::zeros(DType::kF64, {padded, D});
  const double loss = ref::head_cross_entropy<double>(ctx, {.vocab = V,
                                                            .f = f,
                                                            .head = head,
                                                            .targets = targets,
                                                            .grad_scale = scale,
                                                            .df = df,
                                                            .dhead = dhead});
  EXPECT_NEAR(loss, want, 1e-12 * want);
  EXPECT_TRUE(testing::close64(df, gf, 1e-8));
  EXPECT_TRUE(testing::close64(dhead, ghead, 1e-8));  // padded rows: zero in both
}

}  // namespace
}  // namespace ssm
