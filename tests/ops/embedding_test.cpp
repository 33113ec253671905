// embedding and embedding_backward on every backend against ref: I64 and I32
// ids, batches and single tokens, odd widths, scale 1 and not, out and dout
// as column blocks of wider tensors, repeated ids in the backward (which
// adds into dtable), results independent of the thread count to the bit;
// ref's backward against finite differences of ref's forward in float64.
#include "ops/ref/embedding.h"

#include <gtest/gtest.h>

#include <random>

#include "op_test_support.h"
#include "ssm/ops/embedding.h"

namespace ssm {
namespace {

using testing::Block;

// (B, L) ids in [0, vocab) of the given dtype.
Tensor random_ids(int64_t B, int64_t L, int64_t vocab, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  Tensor ids = Tensor::empty(dtype, {B, L});
  for (int64_t i = 0; i < B * L; ++i) {
    if (dtype == DType::kI64)
      ids.data<int64_t>()[i] = pick(rng);
    else
      ids.data<int32_t>()[i] = static_cast<int32_t>(pick(rng));
  }
  return ids;
}

struct Case {
  int64_t B, L, V, D;
  float scale;
};
// Few ids for many rows: repeats in every case; the last two are large
// enough for the cpu kernels to use both threads.
const Case kCases[] = {{2, 5, 7, 13, 1.f},
                       {3, 1, 11, 8, 0.37f},
                       {1, 9, 3, 1, 1.f},
                       {4, 16, 5, 640, 2.5f},
                       {2, 40, 50, 777, 1.f}};

Tensor run_forward(Context& ctx, const Tensor& ids, const Tensor& table, const Block& out,
                   float scale) {
  const Block o = on(ctx, out);
  ops::embedding(ctx, {.ids = testing::on(ctx, ids),
                       .table = testing::on(ctx, table),
                       .out = o.view(),
                       .scale = scale});
  return testing::host(o.wide);
}

// host_ids: the caller's host copy of the ids handed over too.
Tensor run_backward(Context& ctx, const Tensor& ids, const Block& dout, const Tensor& dtable,
                    float scale, bool host_ids = false) {
  const Tensor d = testing::on(ctx, dtable);
  ops::embedding_backward(ctx, {.ids = testing::on(ctx, ids),
                                .dout = on(ctx, dout).view(),
                                .scale = scale,
                                .dtable = d,
                                .host_ids = host_ids ? ids : Tensor()});
  return testing::host(d);
}

class Embedding : public ::testing::TestWithParam<std::string> {};

TEST_P(Embedding, ForwardAndBackwardMatchRef) {
  for (const Case& c : kCases)
    for (DType dtype : {DType::kI64, DType::kI32})
      for (bool strided : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "D " << c.D << ", " << dtype_name(dtype) << (strided ? ", strided" : ""));
        const Tensor ids = random_ids(c.B, c.L, c.V, dtype, 1);
        const Tensor table = testing::random_tensor({c.V, c.D}, 2);
        const Block out =
            testing::random_block({c.B, c.L, c.D}, strided ? 1 : 0, strided ? 3 : 0, 3);
        const Block dout =
            testing::random_block({c.B, c.L, c.D}, strided ? 2 : 0, strided ? 2 : 0, 4);
        const Tensor dtable = testing::random_tensor({c.V, c.D}, 5);  // added to
        Context ref("ref", 1);
        const Tensor want = run_forward(ref, ids, table, out, c.scale);
        const Tensor want_d = run_backward(ref, ids, dout, dtable, c.scale);
        for (int threads : {1, 2}) {
          Context ctx(GetParam(), threads);
          EXPECT_TRUE(testing::close(run_forward(ctx, ids, table, out, c.scale), want));
          EXPECT_TRUE(testing::close(run_backward(ctx, ids, dout, dtable, c.scale), want_d))
              << threads << " threads";
        }
      }
}

TEST_P(Embedding, ThreadCountChangesNoBit) {
  const Case c = kCases[4];
  const Tensor ids = random_ids(c.B, c.L, 6, DType::kI64, 7);  // every id many times
  const Block dout = testing::random_block({c.B, c.L, c.D}, 0, 0, 8);
  const Tensor dtable = testing::random_tensor({c.V, c.D}, 9);
  Context one(GetParam(), 1), two(GetParam(), 2);
  EXPECT_TRUE(testing::identical(run_backward(one, ids, dout, dtable, 0.5f),
                                 run_backward(two, ids, dout, dtable, 0.5f)));
  // The ids' host copy (which spares a device reading them back) changes no bit.
  EXPECT_TRUE(testing::identical(run_backward(one, ids, dout, dtable, 0.5f, true),
                                 run_backward(one, ids, dout, dtable, 0.5f)));
  const Block out = testing::random_block({c.B, c.L, c.D}, 0, 0, 10);
  EXPECT_TRUE(testing::identical(run_forward(one, ids, dtable, out, 0.5f),
                                 run_forward(two, ids, dtable, out, 0.5f)));
}

TEST_P(Embedding, AnIdOutsideTheTableIsRefused) {
  Context ctx(GetParam(), 1);
  Tensor ids = random_ids(1, 3, 4, DType::kI32, 11);
  ids.data<int32_t>()[2] = 4;
  const Tensor table = testing::random_tensor({4, 6}, 12),
               out = Tensor::zeros(DType::kF32, {1, 3, 6});
  EXPECT_ANY_THROW(ops::embedding(ctx, {.ids = ids, .table = table, .out = out}));
  const Tensor dtable = Tensor::zeros(DType::kF32, {4, 6});
  EXPECT_ANY_THROW(ops::embedding_backward(ctx, {.ids = ids, .dout = out, .dtable = dtable}));
  EXPECT_TRUE(testing::identical(dtable, Tensor::zeros(DType::kF32, {4, 6})));
}

INSTANTIATE_TEST_SUITE_P(Backends, Embedding, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// ref in float64: the forward is scale * table[id] row by row, and the
// backward, adding into a non-zero dtable, is the gradient of
// sum(w o embedding(table)) by centred differences.
TEST(EmbeddingRef, MatchesRowsAndFiniteDifferences) {
  const int64_t B = 2, L = 6, V = 4, D = 5;
  const float scale = 1.5f;
  const Tensor ids = random_ids(B, L, V, DType::kI64, 13);
  Tensor table = testing::to_f64(testing::random_tensor({V, D}, 14));
  const Tensor w = testing::to_f64(testing::random_tensor({B, L, D}, 15));
  Context ctx("ref", 1);
  Arena::Scope scope(ctx.arena());
  const Tensor out = Tensor::zeros(DType::kF64, {B, L, D});
  auto J = [&] {
    ref::embedding<double>(ctx, {.ids = ids, .table = table, .out = out, .scale = scale});
    return testing::weighted_sum(out, w);
  };
  J();
  for (int64_t r = 0; r < B * L; ++r)
    for (int64_t d = 0; d < D; ++d)
      EXPECT_EQ(out.data<double>()[r * D + d],
                scale * table.data<double>()[ids.data<int64_t>()[r] * D + d]);
  const Tensor g = testing::fd_gradient(table, J);
  const Tensor start = testing::to_f64(testing::random_tensor({V, D}, 16));
  Tensor dtable = start.clone();
  ref::embedding_backward<double>(ctx, {.ids = ids, .dout = w, .scale = scale, .dtable = dtable});
  for (int64_t i = 0; i < V * D; ++i) dtable.data<double>()[i] -= start.data<double>()[i];
  EXPECT_TRUE(testing::close64(dtable, g, 1e-9));
}

}  // namespace
}  // namespace ssm
