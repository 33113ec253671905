// The scans with a state stored in BF16 (ops/state_dtype.h) on every
// backend: each equals its definition on the same backend (the state
// widened to F32, the op run with it, the new state rounded to nearest
// even) to the bit, whether the backend steps the BF16 rows itself (cpu at
// L = 1; cuda at every L, the chunked scans' state pass included) or the op
// widens around the kernel; and each is close to ref's, its states within
// one BF16 ulp. ssd_scan (a step and chunked prefill), Mamba-3 SISO and
// MIMO (step and chunks, mamba3_scan and the fused mamba3_prepare_scan's
// step path through mamba3_scan's checks). The fused ssd_step is tested in
// ssd_step_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ops/mamba3_scan_util.h"
#include "ops/ssd_problem.h"
#include "ssm/ops/mamba3.h"

namespace ssm {
namespace {

using testing::host;
using testing::on;

Tensor bf16(const Tensor& t) { return host(t).to_dtype(DType::kBF16); }

// Distance in BF16 steps between two BF16 tensors of one shape.
int64_t max_bf16_ulps(const Tensor& a, const Tensor& b) {
  const Tensor x = host(a).clone(), y = host(b).clone();
  EXPECT_EQ(x.dtype(), DType::kBF16);
  EXPECT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(x.shape(), y.shape());
  const auto* u = static_cast<const uint16_t*>(x.raw());
  const auto* v = static_cast<const uint16_t*>(y.raw());
  // Sign-magnitude to a monotone integer line.
  const auto line = [](uint16_t h) { return h & 0x8000 ? 0x8000 - (h & 0x7fff) : 0x8000 + int64_t{h}; };
  int64_t worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) worst = std::max(worst, std::abs(line(u[i]) - line(v[i])));
  return worst;
}

// The new BF16 state near ref's: within one BF16 step entry by entry on
// the host backends, whose F32 scans are ref's to a few F32 steps. A GPU's
// chunked scan (3xTF32 products, another order) can move an entry near zero
// across more than one of its (tiny) BF16 steps; there the bound is one
// step of the largest entry (2^-7 of it), as close() measures.
void expect_state_near_ref(const std::string& backend, const Tensor& got, const Tensor& want) {
  if (testing::is_gpu_backend(backend))
    EXPECT_TRUE(testing::close(got, want, {.rel = 0x1p-7, .abs = 0}));
  else
    EXPECT_LE(max_bf16_ulps(got, want), 1);
}

struct Ran {
  Tensor y, state;  // host
};

class Bf16StateTest : public ::testing::TestWithParam<std::string> {};

// ---- Mamba-2 ----

struct SsdCase {
  int64_t B, L, H, P, N, G, chunk;
};
const SsdCase kSsdCases[] = {
    {2, 1, 24, 64, 128, 1, 256},  // a decode step at the 130m's head shape
    {3, 1, 4, 8, 20, 2, 256},     // N not a multiple of the vector width
    {2, 7, 4, 8, 16, 2, 256},     // a short prefill
    {1, 70, 3, 16, 32, 1, 32},    // chunked, a partial last chunk
};

Ran run_ssd(Context& ctx, const testing::SsdProblem& p, const SsdCase& c, const Tensor& state) {
  ops::SsdScanArgs a = testing::ssd_args_on(ctx, p, testing::SsdLayout::kDense, c.chunk);
  a.state = on(ctx, state.clone());
  ops::ssd_scan(ctx, a);
  return {host(a.y), host(a.state)};
}

TEST_P(Bf16StateTest, SsdScanIsItsDefinitionAndCloseToRef) {
  for (const SsdCase& c : kSsdCases) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " L " << c.L << " N " << c.N);
    const testing::SsdProblem p = testing::SsdProblem::random(c.B, c.L, c.H, c.P, c.N, c.G, 11);
    const Tensor s16 = bf16(p.state), s32 = s16.to_f32();
    Context ctx(GetParam(), 2);
    const Ran got = run_ssd(ctx, p, c, s16), def = run_ssd(ctx, p, c, s32);
    EXPECT_TRUE(testing::bitwise_equal(got.y, def.y));
    EXPECT_TRUE(testing::bitwise_equal(got.state, bf16(def.state)));
    Context ref("ref", 1);
    const Ran want = run_ssd(ref, p, c, s16);
    EXPECT_TRUE(testing::close(got.y, want.y, {1e-4, 1e-5}));
    expect_state_near_ref(GetParam(), got.state, want.state);
  }
}

// ---- Mamba-3 ----

using testing::m3::ScanCase;
using testing::m3::ScanInputs;
const ScanCase kM3Cases[] = {
    {2, 1, 3, 16, 32, 1, 64},  // SISO step
    {64, 1, 4, 24, 64, 1, 64},  // SISO step, many sequences (cuda: mamba3_scan_step.cu)
    {2, 1, 3, 16, 32, 4, 64},  // MIMO step, rank 4
    {1, 1, 2, 8, 20, 3, 64},   // rank 3 (the any-rank step), N off the vector width
    {1, 9, 2, 16, 32, 1, 4},   // SISO chunks
    {1, 9, 2, 16, 32, 2, 4},   // MIMO chunks
};

Ran run_m3(Context& ctx, const ScanCase& c, const ScanInputs& in, const Tensor& state) {
  ops::Mamba3ScanArgs a = testing::m3::scan_args(c, in, testing::m3::Place::of(ctx));
  a.ssm = on(ctx, state.clone());
  ops::mamba3_scan(ctx, a);
  return {host(a.o), host(a.ssm)};
}

TEST_P(Bf16StateTest, Mamba3ScanIsItsDefinitionAndCloseToRef) {
  for (const ScanCase& c : kM3Cases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 21);
    const Tensor s16 = bf16(in.ssm), s32 = s16.to_f32();
    Context ctx(GetParam(), 2);
    const Ran got = run_m3(ctx, c, in, s16), def = run_m3(ctx, c, in, s32);
    EXPECT_TRUE(testing::bitwise_equal(got.y, def.y));
    EXPECT_TRUE(testing::bitwise_equal(got.state, bf16(def.state)));
    Context ref("ref", 1);
    const Ran want = run_m3(ref, c, in, s16);
    EXPECT_TRUE(testing::close(got.y, want.y, {1e-4, 1e-5}));
    expect_state_near_ref(GetParam(), got.state, want.state);
  }
}

// The rounding is to nearest, ties to even, not truncation, in the step's
// store (the cpu's vector store and its partial last vector: N = 20) and in
// the chunked scan's (L = 70, chunks of 32: cuda's state pass): with A = 0
// (decay 1), dt = 1 and x = 1 at the last step only (0 before) the new state
// is S + B exactly in F32, S = +-1 and B chosen so that S + B is a tie or
// just off one.
TEST_P(Bf16StateTest, StoreRoundsToNearestEven) {
  for (const int64_t L : {1, 70}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    Context ctx(GetParam(), 1);
    constexpr int64_t N = 20;
    testing::SsdProblem p = testing::SsdProblem::random(1, L, 1, 1, N, 1, 3, /*with_D=*/false);
    for (int64_t t = 0; t < L; ++t) {
      p.x.data<float>()[t] = t == L - 1 ? 1.f : 0.f;
      p.dt.data<float>()[t] = 1.f;
    }
    p.A.data<float>()[0] = 0.f;
    // (S, B, the BF16 bits of S + B)
    struct Case {
      float S, B;
      uint16_t bits;
    };
    const Case cases[4] = {
        {1.f, 0x1p-8f, 0x3f80},                   // 1 + 2^-8: a tie, to even (down)
        {1.f, 3 * 0x1p-8f, 0x3f82},               // 1 + 3 2^-8: a tie, to even (up)
        {1.f, 0x1p-8f - 0x1p-20f, 0x3f80},        // below the tie
        {-1.f, -(0x1p-8f + 0x1p-20f), 0xbf81},   // above the tie, negative
    };
    Tensor s = Tensor::empty(DType::kF32, {1, 1, 1, N});
    for (int64_t n = 0; n < N; ++n) {
      s.data<float>()[n] = cases[n % 4].S;
      p.Bm.data<float>()[(L - 1) * N + n] = cases[n % 4].B;
    }
    ops::SsdScanArgs a = testing::ssd_args_on(ctx, p, testing::SsdLayout::kDense, 32);
    a.state = on(ctx, s.to_dtype(DType::kBF16));
    ops::ssd_scan(ctx, a);
    const Tensor got = host(a.state);
    const auto* bits = static_cast<const uint16_t*>(got.raw());
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(bits[n], cases[n % 4].bits) << "n " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16StateTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
