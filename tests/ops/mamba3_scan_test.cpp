// mamba3_scan on every backend against ref (the sequential recurrence in
// double): SISO and MIMO R = 2, 4, chunks that do or do not divide the
// length, chunks of one step, one chunk for the whole sequence, L = 1 (the
// decode step, and at batch 52 and 26: the cuda kernel's wide blocks, SISO;
// at 64 and 32 its streamed step), batch > 1, saved and fresh states, with
// and without D; 1 and 2 threads, which give identical results; a
// sequence's step alone and in a batch, bitwise. Then what the state means: L
// single steps equal one pass, a split sequence carrying its state equals one
// pass, and a fresh sequence equals one from a zero state. The reference
// itself is checked against the recurrence's closed form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/against_ref.h"
#include "ops/cpu/x86_kernels.h"
#include "ops/mamba3_scan_util.h"
#include "ops/ref/mamba3_ref.h"

namespace ssm {
namespace {

using testing::close;
using testing::host;
using testing::Tolerance;
using namespace testing::m3;

// {B, L, H, P, N, R, chunk (rows: time steps x rank), state, D}
const ScanCase kCases[] = {
    {2, 21, 3, 8, 16, 1, 8},              // SISO, partial last chunk
    {1, 40, 2, 16, 32, 1, 16},            // SISO, exact chunks
    {2, 19, 2, 8, 16, 2, 8},              // MIMO R = 2, 4 steps a chunk
    {1, 23, 2, 8, 16, 4, 8},              // MIMO R = 4, 2 steps a chunk
    {1, 45, 2, 8, 16, 4, 64},             // MIMO R = 4, 16 steps a chunk: causal row blocks
    {2, 9, 3, 8, 8, 4, 3},                // chunk smaller than R: 1 step a chunk
    {1, 7, 2, 3, 4, 1, 1},                // chunks of one step
    {1, 50, 1, 4, 8, 1, 64},              // one chunk
    {1, 100, 2, 16, 32, 1, 64},           // the default chunk, partial
    {2, 13, 2, 5, 8, 2, 8, false},        // fresh sequence
    {2, 11, 3, 4, 8, 1, 4, true, false},  // no D
    {1, 1, 2, 8, 16, 2, 8},               // one step, MIMO
    {3, 1, 3, 5, 8, 1, 64},               // one step, SISO, batch 3
    {2, 1, 2, 4, 8, 4, 64, false},        // one step, fresh
    {52, 1, 2, 80, 40, 1, 64},            // one step, many sequences (cuda: rows 64 + 16 a block)
    {26, 1, 4, 80, 20, 2, 64},            // the same, MIMO R = 2 (cuda: rows 16 a block)
    // Many sequences, SISO: cuda's streamed step (mamba3_scan_step.cu; the
    // 52-sequence case too) with 24 rows of a block's 64 or 128, and with
    // the 130m head (16 lanes a row); N not a multiple of 8: the wide blocks.
    {64, 1, 4, 24, 64, 1, 64},
    {32, 1, 4, 64, 128, 1, 64},
    {64, 1, 3, 40, 36, 1, 64},
};
// The many-sequence SISO steps above.
const size_t kManySiso[] = {14, 16, 17, 18};

// The chunked form reorders the F32 sums of the recurrence into matrix
// products; against the double recurrence its error stays near 1e-6.
constexpr Tolerance kTol{1e-5, 1e-6};

Named results(const ops::Mamba3ScanArgs& a) {
  return {{"o", a.o}, {"ssm", a.ssm}, {"k_prev", a.k_prev}, {"v_prev", a.v_prev}};
}

ops::Mamba3ScanArgs run_scan(Context& ctx, const ScanCase& c, const ScanInputs& in) {
  ops::Mamba3ScanArgs a = scan_args(c, in, Place::of(ctx));
  ops::mamba3_scan(ctx, a);
  return a;
}

class Mamba3Scan : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3Scan, MatchesRef) {
  Context ref("ref", 1);
  for (const ScanCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 42 + c.L);
    expect_matches(
        GetParam(), results(run_scan(ref, c, in)),
        [&](Context& ctx) { return results(run_scan(ctx, c, in)); }, kTol);
  }
}

// Decoding: one call per step, the state carried, equals one pass.
TEST_P(Mamba3Scan, StepsEqualOnePass) {
  for (const ScanCase& c : {ScanCase{2, 9, 2, 4, 8, 1, 4}, ScanCase{1, 7, 2, 3, 8, 2, 4}}) {
    SCOPED_TRACE(::testing::Message() << c);
    Context ctx(GetParam(), 2);
    const ScanInputs in(c, 7);
    const ops::Mamba3ScanArgs full = run_scan(ctx, c, in);
    ScanCase step = c;
    step.L = 1;
    ScanInputs carried = in;
    for (int64_t t = 0; t < c.L; ++t) {
      const ops::Mamba3ScanArgs a = run_scan(ctx, step, carried.steps(t, t + 1));
      EXPECT_TRUE(close(a.o, host(full.o).slice(2, t, t + 1), kTol)) << "step " << t;
      carried.ssm = host(a.ssm);
      carried.k_prev = host(a.k_prev);
      carried.v_prev = host(a.v_prev);
    }
    EXPECT_TRUE(close(carried.ssm, full.ssm, kTol)) << "final state";
    EXPECT_TRUE(close(carried.k_prev, full.k_prev, kTol));
    EXPECT_TRUE(close(carried.v_prev, full.v_prev, kTol));
  }
}

// A prefill continuing from a saved state, with a split inside a chunk.
TEST_P(Mamba3Scan, SplitSequenceCarriesTheState) {
  for (const ScanCase& c : {ScanCase{2, 30, 2, 8, 16, 1, 8}, ScanCase{1, 25, 2, 4, 8, 2, 8},
                            ScanCase{2, 17, 2, 4, 8, 4, 8, false}}) {
    SCOPED_TRACE(::testing::Message() << c);
    Context ctx(GetParam(), 2);
    const ScanInputs in(c, 9);
    const ops::Mamba3ScanArgs full = run_scan(ctx, c, in);
    const int64_t l1 = c.L / 2 + 1;
    ScanCase c1 = c, c2 = c;
    c1.L = l1;
    c2.L = c.L - l1;
    c1.state = c2.state = true;
    ScanInputs first = in.steps(0, l1);
    if (!c.state) {  // a fresh sequence: the first part starts from zeros
      for (Tensor* t : {&first.ssm, &first.k_prev, &first.v_prev})
        *t = Tensor::zeros(DType::kF32, t->shape());
    }
    const ops::Mamba3ScanArgs a1 = run_scan(ctx, c1, first);
    ScanInputs second = in.steps(l1, c.L);
    second.ssm = host(a1.ssm);
    second.k_prev = host(a1.k_prev);
    second.v_prev = host(a1.v_prev);
    const ops::Mamba3ScanArgs a2 = run_scan(ctx, c2, second);
    EXPECT_TRUE(close(a1.o, host(full.o).slice(2, 0, l1), kTol)) << "first part";
    EXPECT_TRUE(close(a2.o, host(full.o).slice(2, l1, c.L), kTol)) << "second part";
    if (c.state) {
      EXPECT_TRUE(close(a2.ssm, full.ssm, kTol)) << "final state";
      EXPECT_TRUE(identical(a2.k_prev, full.k_prev));
      EXPECT_TRUE(identical(a2.v_prev, full.v_prev));
    }
  }
}

TEST_P(Mamba3Scan, FreshSequenceStartsFromZeros) {
  for (const ScanCase& c :
       {ScanCase{2, 12, 2, 4, 8, 2, 8, false}, ScanCase{2, 1, 2, 4, 8, 1, 8, false}}) {
    SCOPED_TRACE(::testing::Message() << c);
    Context ctx(GetParam(), 2);
    ScanInputs in(c, 5);
    const ops::Mamba3ScanArgs fresh = run_scan(ctx, c, in);
    for (Tensor* t : {&in.ssm, &in.k_prev, &in.v_prev}) *t = Tensor::zeros(DType::kF32, t->shape());
    ScanCase zero = c;
    zero.state = true;
    EXPECT_TRUE(identical(fresh.o, run_scan(ctx, zero, in).o));
  }
}

// BF16 state products (a model whose projections run in BF16): near ref at
// BF16's precision for SISO at the 130m head shape, odd P and N, MIMO with
// an odd row count per chunk and a fresh sequence; a backend without such
// products computes exactly as without the flag, and the cpu backend on a
// CPU with AVX-512 BF16 does not (so the mode is seen to take effect).
TEST_P(Mamba3Scan, Bf16StateProductsStayNearRef) {
  Context ctx(GetParam(), 2), ref("ref", 1);
  for (const ScanCase& c :
       {ScanCase{1, 150, 2, 64, 128, 1, 64}, ScanCase{2, 21, 3, 7, 13, 1, 8},
        ScanCase{1, 23, 2, 8, 16, 4, 12}, ScanCase{2, 30, 2, 8, 16, 2, 16, false}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 31 + c.L);
    auto run = [&](Context& x, bool bf16) {
      ops::Mamba3ScanArgs a = scan_args(c, in, Place::of(x));
      a.bf16_state_products = bf16;
      ops::mamba3_scan(x, a);
      return a;
    };
    const ops::Mamba3ScanArgs want = run(ref, false), rounded = run(ctx, true),
                              precise = run(ctx, false);
    EXPECT_TRUE(close(host(rounded.o), host(want.o), {1e-2, 1e-3})) << "o";
    if (c.state) {
      EXPECT_TRUE(close(host(rounded.ssm), host(want.ssm), {1e-2, 1e-3})) << "ssm";
    }
    const bool has_bf16 = GetParam() == "cpu" && cpu::cpu_bf16_dot_products_fast();
    EXPECT_EQ(static_cast<bool>(identical(rounded.o, precise.o)), !has_bf16);
  }
}

// A sequence's decode step gives the same bits whatever the batch around it
// (ssm serve batches sessions): at batch 1 cuda's scan_kernel takes blocks
// of 16 rows, with many sequences its wide blocks or mamba3_scan_step.cu.
// Two steps, F32 and BF16 states, three sequences of each batch.
TEST_P(Mamba3Scan, ASequenceHasTheSameBitsAtAnyBatch) {
  for (const size_t i : kManySiso) {
    for (const bool bf16 : {false, true}) {
      const ScanCase& c = kCases[i];
      SCOPED_TRACE(::testing::Message() << c << (bf16 ? " bf16" : " f32"));
      ScanCase one = c;
      one.B = 1;
      const ScanInputs in(c, 42 + c.L);
      Context ctx(GetParam(), 2);
      const Place at = Place::of(ctx);
      const auto state_of = [&](const Tensor& t) { return testing::on(ctx, bf16 ? t.to_dtype(DType::kBF16) : t); };
      ops::Mamba3ScanArgs batch = scan_args(c, in, at);
      batch.ssm = state_of(in.ssm);
      const int64_t picks[] = {0, c.B / 2, c.B - 1};
      std::vector<ops::Mamba3ScanArgs> each;
      for (const int64_t b : picks) {
        ScanInputs mine = in;
        for (Tensor* t : {&mine.q, &mine.k, &mine.v, &mine.dt, &mine.A, &mine.lam, &mine.ssm, &mine.k_prev,
                          &mine.v_prev})
          *t = t->rows(b, b + 1).clone();
        each.push_back(scan_args(one, mine, at));
        each.back().ssm = state_of(mine.ssm);
      }
      for (int step = 0; step < 2; ++step) {
        ops::mamba3_scan(ctx, batch);
        for (size_t s = 0; s < each.size(); ++s) {
          ops::mamba3_scan(ctx, each[s]);
          const Named got = results(batch), want = results(each[s]);
          for (size_t k = 0; k < got.size(); ++k)
            EXPECT_TRUE(testing::bitwise_equal(host(got[k].second).rows(picks[s], picks[s] + 1),
                                               host(want[k].second)))
                << got[k].first << ", sequence " << picks[s] << ", step " << step;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba3Scan, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// The recurrence unrolled (SPEC §4): S_t = prod_{u<=t} alpha_u S_{-1}
// + beta_0 prod_{0<u<=t} alpha_u U_{-1} + sum_{s<=t} c_ts U_s, with
// c_ts = gamma_s prod_{s<u<=t} alpha_u + [s < t] beta_{s+1} prod_{s+1<u<=t} alpha_u,
// U_s = sum_r v_s,r k_s,r^T; o_t,r = S_t q_t,r + D v_t,r. In double.
TEST(Mamba3RefScan, MatchesTheClosedForm) {
  for (const ScanCase& c : {ScanCase{2, 9, 2, 3, 4, 1, 4}, ScanCase{1, 8, 2, 3, 4, 2, 4},
                            ScanCase{1, 6, 1, 2, 3, 4, 4}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 77);
    const ops::Mamba3ScanArgs a = scan_args(c, in, Place::f64());
    const Tensor S0 = a.ssm.clone(), kp = a.k_prev.clone(), vp = a.v_prev.clone();
    ref::mamba3_scan<double>(a);
    const int64_t L = c.L, R = c.R, N = c.N, P = c.P;
    auto val = [](const Tensor& t, int64_t i) { return t.data<double>()[i]; };
    Tensor o = Tensor::zeros(DType::kF64, a.o.shape()), S = Tensor::zeros(DType::kF64, S0.shape());
    for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
      auto alpha = [&](int64_t u) {
        return std::exp(val(a.A, bh * L + u) * val(a.dt, bh * L + u));
      };
      auto decay = [&](int64_t from, int64_t to) {  // prod_{from <= u <= to} alpha_u
        double p = 1;
        for (int64_t u = from; u <= to; ++u) p *= alpha(u);
        return p;
      };
      auto beta = [&](int64_t u) {
        return (1 - val(a.lam, bh * L + u)) * val(a.dt, bh * L + u) * alpha(u);
      };
      auto gamma = [&](int64_t u) { return val(a.lam, bh * L + u) * val(a.dt, bh * L + u); };
      for (int64_t t = 0; t < L; ++t)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n) {
            // S_t[p, n], term by term.
            double s = decay(0, t) * val(S0, (bh * P + p) * N + n);
            for (int64_t r = 0; r < R; ++r)
              s += beta(0) * decay(1, t) * val(vp, (bh * R + r) * P + p) *
                   val(kp, (bh * R + r) * N + n);
            for (int64_t u = 0; u <= t; ++u) {
              const double cu =
                  gamma(u) * decay(u + 1, t) + (u < t ? beta(u + 1) * decay(u + 2, t) : 0);
              for (int64_t r = 0; r < R; ++r)
                s += cu * val(a.v, ((bh * L + u) * R + r) * P + p) *
                     val(a.k, ((bh * L + u) * R + r) * N + n);
            }
            for (int64_t r = 0; r < R; ++r)
              o.data<double>()[((bh * L + t) * R + r) * P + p] +=
                  s * val(a.q, ((bh * L + t) * R + r) * N + n);
            if (t == L - 1) S.data<double>()[(bh * P + p) * N + n] = s;
          }
      for (int64_t i = bh * L * R * P; i < (bh + 1) * L * R * P; ++i)
        o.data<double>()[i] += val(a.D, bh % c.H) * val(a.v, i);
    }
    EXPECT_TRUE(close64(a.o, o, 1e-12)) << "o";
    EXPECT_TRUE(close64(a.ssm, S, 1e-12)) << "final state";
  }
}

}  // namespace
}  // namespace ssm
