// attention_backward and rope_backward on every backend against ref: MHA,
// GQA, MQA, one token, several query blocks, the hybrids' 64-channel heads;
// q and the gradients as column blocks of wider (qkv-shaped) tensors, as the
// attention layer passes them; the gradients overwrite what was there; 1 and
// 2 threads give equal bits; products rounded to TF32 where a context asks.
// (ref itself is checked against finite differences in attention_ref_test.)
#include <gtest/gtest.h>

#include <cmath>

#include "attention_test_support.h"
#include "op_test_support.h"
#include "ssm/ops/attention.h"

namespace ssm {
namespace {

using testing::Block;

struct Case {
  const char* name;
  int64_t B, L, H, Hkv, hd;
};

const Case kCases[] = {
    {"gqa", 2, 7, 4, 2, 3},
    {"mha", 1, 9, 2, 2, 8},
    {"mqa", 2, 5, 4, 1, 6},
    {"one_token", 3, 1, 2, 1, 4},
    {"several_query_blocks", 1, 70, 2, 1, 2},
    {"two_blocks_batch", 2, 130, 2, 2, 4},
    {"head_dim_64_gqa", 2, 70, 4, 2, 64},  // the hybrids' head
    {"head_dim_96", 1, 20, 2, 1, 96},
};

struct Inputs {
  int64_t H, Hkv;
  float scale;
  Block qkv;  // q: its first H hd columns
  Tensor k, v, out, dout;
  Block dqkv;  // [dq | dk | dv], garbage before the call
};

Inputs make_inputs(const Case& c, uint64_t seed) {
  const int64_t width = (c.H + 2 * c.Hkv) * c.hd;
  Inputs in{.H = c.H, .Hkv = c.Hkv, .scale = 1.f / std::sqrt(static_cast<float>(c.hd))};
  in.qkv = testing::random_block({c.B, c.L, width}, 1, 3, seed);
  in.k = testing::random_tensor({c.B, c.Hkv, c.L, c.hd}, seed + 1, -2.f, 2.f);
  in.v = testing::random_tensor({c.B, c.Hkv, c.L, c.hd}, seed + 2);
  in.dout = testing::random_tensor({c.B, c.L, c.H * c.hd}, seed + 3);
  in.dqkv = testing::random_block({c.B, c.L, width}, 2, 5, seed + 4);
  // The backward reads the forward's output: ref's.
  Context ref("ref", 1);
  in.out = Tensor::empty(DType::kF32, {c.B, c.L, c.H * c.hd});
  ops::attention(ref, {.heads = c.H,
                       .kv_heads = c.Hkv,
                       .qkv = in.qkv.view(),
                       .k_cache = in.k,
                       .v_cache = in.v,
                       .past = testing::i64_tensor(std::vector<int64_t>(c.B, 0)),
                       .scale = in.scale,
                       .out = in.out});
  return in;
}

// The whole dqkv tensor after the backward on ctx.
Tensor run(Context& ctx, const Inputs& in) {
  const int64_t hd = in.k.dim(3), nq = in.H * hd, nk = in.Hkv * hd;
  const Block dqkv = on(ctx, in.dqkv);
  const Tensor d = dqkv.view();
  ops::attention_backward(ctx, {.heads = in.H,
                                .kv_heads = in.Hkv,
                                .q = on(ctx, in.qkv).view().cols(0, nq),
                                .k = testing::on(ctx, in.k),
                                .v = testing::on(ctx, in.v),
                                .out = testing::on(ctx, in.out),
                                .dout = testing::on(ctx, in.dout),
                                .scale = in.scale,
                                .dq = d.cols(0, nq),
                                .dk = d.cols(nq, nq + nk),
                                .dv = d.cols(nq + nk, nq + 2 * nk)});
  return testing::host(dqkv.wide);
}

class AttentionBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionBackward, MatchesRef) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c, 10);
    Context ref("ref", 1);
    const Tensor want = run(ref, in);
    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      // dq, dk, dv and the untouched columns around them at once.
      EXPECT_TRUE(testing::close(run(ctx, in), want)) << threads << " threads";
    }
  }
}

TEST_P(AttentionBackward, ThreadCountChangesNoBit) {
  const Inputs in = make_inputs(kCases[5], 20);
  Context one(GetParam(), 1), two(GetParam(), 2);
  EXPECT_TRUE(testing::identical(run(one, in), run(two, in)));
}

// rope_backward over dq and dk as blocks of a dqkv tensor, partial and full
// rotary, several heads per kv head.
Tensor run_rope(Context& ctx, const Block& host_dqkv, int64_t H, int64_t Hkv, int64_t hd,
                int64_t rot) {
  const Block dqkv = on(ctx, host_dqkv);
  const Tensor d = dqkv.view();
  ops::rope_backward(ctx, {.heads = H,
                           .kv_heads = Hkv,
                           .head_dim = hd,
                           .inv_freq = testing::on(ctx, testing::rope_inv_freq(rot)),
                           .dq = d.cols(0, H * hd),
                           .dk = d.cols(H * hd, (H + Hkv) * hd)});
  return testing::host(dqkv.wide);
}

TEST_P(AttentionBackward, RopeBackwardMatchesRef) {
  struct RopeCase {
    int64_t B, L, H, Hkv, hd, rot;
  };
  for (const RopeCase& c :
       {RopeCase{2, 5, 3, 1, 6, 4}, RopeCase{1, 70, 4, 2, 8, 8}, RopeCase{3, 1, 2, 2, 4, 2}}) {
    const Block dqkv = testing::random_block({c.B, c.L, (c.H + 2 * c.Hkv) * c.hd}, 1, 4, 30 + c.L);
    Context ref("ref", 1);
    const Tensor want = run_rope(ref, dqkv, c.H, c.Hkv, c.hd, c.rot);
    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      EXPECT_TRUE(testing::close(run_rope(ctx, dqkv, c.H, c.Hkv, c.hd, c.rot), want))
          << "L " << c.L << ", " << threads << " threads";
    }
  }
}

// A context that rounds its products may run the backward's products as
// one TF32 product each (as attention_test's forward): near ref, not the
// exact path's bits.
TEST_P(AttentionBackward, RoundedProductsStayNearRef) {
  Context ctx(GetParam(), 1), exact(GetParam(), 1), ref("ref", 1);
  if (!(ctx.resources() && ctx.resources()->set_bf16_compute(true)))
    GTEST_SKIP() << GetParam() << " has no rounded products";
  for (const Case& c : {kCases[5], kCases[6]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c, 40);
    const Tensor rounded = run(ctx, in), precise = run(exact, in), want = run(ref, in);
    EXPECT_TRUE(testing::close(rounded, want, {3e-3, 1e-4}));
    EXPECT_TRUE(testing::close(precise, want));
    EXPECT_FALSE(testing::identical(rounded, precise));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionBackward, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
