// attention_append_kv and attention on every backend against ref: MHA, GQA
// and MQA; rotary off, over the whole head and over part of it; sequences
// with different numbers of cached tokens; decode (L = 1), over caches of
// several key tiles too; several query blocks (L > 64); the 64- and
// 128-channel heads of the hybrids, heads wider than the flash tiles; qkv and out as
// column blocks of wider tensors; products rounded to TF32 where a context
// asks for it. Then the
// cache's promises: a prefill split into parts and decode steps equals one
// prefill, a batch of different lengths equals its sequences one by one, and
// neither the thread count nor positions given on the device change a bit.
#include "ssm/ops/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attention_test_support.h"
#include "op_test_support.h"

namespace ssm {
namespace {

using testing::Block;

struct Case {
  const char* name;
  int64_t B, L, H, Hkv, hd, rot;
  std::vector<int64_t> past;
};

const Case kCases[] = {
    {"mha_prefill", 2, 9, 2, 2, 8, 0, {0, 0}},
    {"gqa_full_rotary", 2, 13, 4, 2, 8, 8, {0, 0}},
    {"mqa_partial_rotary_past", 3, 5, 4, 1, 6, 4, {0, 3, 7}},
    {"decode", 3, 1, 4, 2, 16, 8, {0, 5, 17}},
    {"several_query_blocks", 2, 150, 2, 1, 4, 2, {0, 20}},
    {"odd_sizes", 1, 7, 3, 3, 5, 2, {2}},
    // The hybrids' head (64 channels, rotary over all of it), a continued
    // prefill whose diagonal crosses two key tiles.
    {"head_dim_64_past", 2, 70, 4, 2, 64, 64, {0, 37}},
    {"head_dim_96", 1, 20, 2, 1, 96, 32, {3}},  // 32-column groups past the head's end
    // Decode over caches of several 64-key tiles, split over blocks (cuda):
    // lengths not a multiple of the tile, one of exactly three tiles, one
    // key alone; GQA and MQA; the 128-channel heads.
    {"decode_long_gqa", 2, 1, 4, 2, 64, 64, {300, 137}},
    {"decode_head_dim_128_mqa", 3, 1, 4, 1, 128, 32, {0, 64, 191}},
    // More than 32 splits' worth of tiles (2,101 keys: two tiles a split).
    {"decode_longer_than_the_splits", 1, 1, 2, 1, 16, 16, {2100}},
    // Heads wider than the flash tiles: every query by the decode kernels.
    {"head_dim_160_prefill", 1, 3, 2, 1, 160, 16, {70}},
};

struct Inputs {
  int64_t heads, kv_heads;
  Block qkv, out;
  Tensor k_cache, v_cache, inv_freq, past;
};

Inputs make_inputs(const Case& c, bool strided, uint64_t seed) {
  const int64_t width = (c.H + 2 * c.Hkv) * c.hd;
  const int64_t cap = *std::max_element(c.past.begin(), c.past.end()) + c.L + 3;
  Inputs in{.heads = c.H, .kv_heads = c.Hkv};
  in.qkv = testing::random_block({c.B, c.L, width}, strided ? 3 : 0, strided ? 7 : 0, seed);
  in.out =
      testing::random_block({c.B, c.L, c.H * c.hd}, strided ? 2 : 0, strided ? 4 : 0, seed + 1);
  // Positions below past hold earlier tokens' keys and values; the rest is
  // stale data the new tokens overwrite or attention must not read.
  in.k_cache = testing::random_tensor({c.B, c.Hkv, cap, c.hd}, seed + 2);
  in.v_cache = testing::random_tensor({c.B, c.Hkv, cap, c.hd}, seed + 3);
  in.inv_freq = testing::rope_inv_freq(c.rot);
  in.past = testing::i64_tensor(c.past);
  return in;
}

struct Outputs {
  Tensor qkv, k_cache, v_cache, out;  // whole wide tensors, on the host
};

// on_device: the positions given on the device too (past_on_device), as a
// recorded decode step gives them.
Outputs run(Context& ctx, const Inputs& in, bool on_device = false) {
  const Block qkv = on(ctx, in.qkv), out = on(ctx, in.out);
  const Tensor k_cache = testing::on(ctx, in.k_cache), v_cache = testing::on(ctx, in.v_cache);
  const int64_t hd = in.k_cache.dim(3);
  const ops::AttentionArgs a{.heads = in.heads,
                             .kv_heads = in.kv_heads,
                             .qkv = qkv.view(),
                             .inv_freq = testing::on(ctx, in.inv_freq),
                             .k_cache = k_cache,
                             .v_cache = v_cache,
                             .past = in.past,
                             .past_on_device = on_device ? testing::on(ctx, in.past) : Tensor(),
                             .scale = 1.f / std::sqrt(static_cast<float>(hd)),
                             .out = out.view()};
  ops::attention_append_kv(ctx, a);
  ops::attention(ctx, a);
  return {testing::host(qkv.wide), testing::host(k_cache), testing::host(v_cache),
          testing::host(out.wide)};
}

class AttentionForward : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionForward, MatchesRef) {
  for (const Case& c : kCases)
    for (bool strided : {false, true}) {
      SCOPED_TRACE(::testing::Message() << c.name << (strided ? ", strided" : ", dense"));
      const Inputs in = make_inputs(c, strided, 100);
      Context ref("ref", 1);
      const Outputs want = run(ref, in);
      for (int threads : {1, 2}) {
        Context ctx(GetParam(), threads);
        const Outputs got = run(ctx, in);
        // Columns outside the views are compared too: nothing else is written.
        EXPECT_TRUE(testing::close(got.qkv, want.qkv)) << "rotated qkv, " << threads << " threads";
        EXPECT_TRUE(testing::close(got.k_cache, want.k_cache)) << "k cache";
        EXPECT_TRUE(testing::close(got.v_cache, want.v_cache)) << "v cache";
        EXPECT_TRUE(testing::close(got.out, want.out)) << "out";
      }
    }
}

TEST_P(AttentionForward, ThreadCountChangesNoBit) {
  const Inputs in = make_inputs(kCases[4], true, 200);
  Context one(GetParam(), 1), two(GetParam(), 2);
  const Outputs a = run(one, in), b = run(two, in);
  EXPECT_TRUE(testing::identical(a.qkv, b.qkv));
  EXPECT_TRUE(testing::identical(a.k_cache, b.k_cache));
  EXPECT_TRUE(testing::identical(a.out, b.out));
}

// The positions read from the device give the bits of those read from the
// host: the decode kernels' work is laid out by the shapes, not the lengths.
TEST_P(AttentionForward, PositionsOnTheDeviceChangeNoBit) {
  for (const Case& c : {kCases[3], kCases[8], kCases[9], kCases[10]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c, true, 250);
    Context ctx(GetParam(), 2);
    const Outputs host = run(ctx, in), device = run(ctx, in, true);
    EXPECT_TRUE(testing::identical(device.out, host.out));
    EXPECT_TRUE(testing::identical(device.k_cache, host.k_cache));
  }
}

// Tokens [t0, t1) of every sequence of a (B, L, width) tensor, dense.
Tensor time_slice(const Tensor& t, int64_t t0, int64_t t1) { return t.slice(1, t0, t1).clone(); }

TEST_P(AttentionForward, PrefillInPartsAndDecodeStepsEqualOnePrefill) {
  const Case whole{"whole", 2, 12, 4, 2, 8, 4, {0, 3}};
  const Inputs all = make_inputs(whole, false, 300);
  Context ctx(GetParam(), 2);
  const Outputs want = run(ctx, all);
  // The same tokens in parts of 5 and 4, then three steps of one.
  Inputs part = all;
  Tensor k_cache = all.k_cache.clone(), v_cache = all.v_cache.clone();
  for (const auto& [t0, t1] : {std::pair{0, 5}, {5, 9}, {9, 10}, {10, 11}, {11, 12}}) {
    part.qkv = testing::dense_block(time_slice(all.qkv.view(), t0, t1));
    part.out = testing::dense_block(time_slice(all.out.view(), t0, t1));
    part.k_cache = k_cache;
    part.v_cache = v_cache;
    part.past = testing::i64_tensor({whole.past[0] + t0, whole.past[1] + t0});
    const Outputs got = run(ctx, part);
    k_cache = got.k_cache;
    v_cache = got.v_cache;
    SCOPED_TRACE(::testing::Message() << "tokens " << t0 << ".." << t1);
    EXPECT_TRUE(testing::close(got.out, time_slice(want.out, t0, t1)));
    EXPECT_TRUE(testing::close(got.qkv, time_slice(want.qkv, t0, t1)));
  }
  EXPECT_TRUE(testing::close(k_cache, want.k_cache));
  EXPECT_TRUE(testing::close(v_cache, want.v_cache));
}

TEST_P(AttentionForward, BatchOfDifferentLengthsEqualsItsSequencesAlone) {
  const Case prefill{"batch", 3, 3, 4, 2, 8, 4, {0, 4, 9}};
  const Case decode{"decode", 3, 1, 4, 2, 16, 8, {5, 130, 70}};  // 1, 3 and 2 key tiles
  for (const Case& batch : {prefill, decode}) {
    SCOPED_TRACE(batch.name);
    const Inputs all = make_inputs(batch, true, 400);
    Context ctx(GetParam(), 2);
    const Outputs want = run(ctx, all);
    for (int64_t b = 0; b < batch.B; ++b) {
      Inputs one = all;
      one.qkv.wide = all.qkv.wide.slice(0, b, b + 1).clone();
      one.out.wide = all.out.wide.slice(0, b, b + 1).clone();
      one.k_cache = all.k_cache.slice(0, b, b + 1).clone();
      one.v_cache = all.v_cache.slice(0, b, b + 1).clone();
      one.past = testing::i64_tensor({batch.past[static_cast<size_t>(b)]});
      const Outputs got = run(ctx, one);
      SCOPED_TRACE(::testing::Message() << "sequence " << b);
      EXPECT_TRUE(testing::close(got.out, want.out.slice(0, b, b + 1).clone(), {1e-6, 1e-7}));
      EXPECT_TRUE(
          testing::close(got.k_cache, want.k_cache.slice(0, b, b + 1).clone(), {1e-6, 1e-7}));
    }
  }
}

// A context that rounds its products (training with --bf16, or cuda's
// SSM_CUDA_ROUND_ACTIVATIONS=1) may run the scores and P V as one TF32
// product each: near ref at TF32's precision, and not the exact path's bits
// (so the mode is seen to take effect). Host backends have no such mode.
TEST_P(AttentionForward, RoundedProductsStayNearRef) {
  Context ctx(GetParam(), 1), exact(GetParam(), 1), ref("ref", 1);
  if (!(ctx.resources() && ctx.resources()->set_bf16_compute(true)))
    GTEST_SKIP() << GetParam() << " has no rounded products";
  for (const Case& c : {kCases[4], kCases[6]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c, true, 500);
    const Outputs rounded = run(ctx, in), precise = run(exact, in), want = run(ref, in);
    EXPECT_TRUE(testing::close(rounded.out, want.out, {3e-3, 1e-4}));
    EXPECT_TRUE(testing::close(precise.out, want.out));
    EXPECT_FALSE(testing::identical(rounded.out, precise.out));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionForward, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
