// mamba3_prepare_scan on every backend against mamba3_prepare then
// mamba3_scan on the same backend: every output but q, k and v the same to
// the bit (the cpu fuses the two per head and chunk with the separate ops'
// arithmetic; other backends run the two ops). SISO and MIMO R = 2, 4,
// chunks that do or do not divide the length, chunks of one step, groups,
// batch > 1, saved and fresh states, one step (decoding); 1 and 2 threads.
// The decode steps (L = 1) are cuda's fused kernel (mamba3_step.cu): SISO
// and MIMO R = 2, 4, groups, several sequences, F32 and BF16 states, two
// steps in a row (the second from the state the first left), state rows in
// several passes of a block and rows past the last pass.
// The two ops are themselves tested against ref (mamba3_prepare_test.cpp,
// mamba3_scan_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "ops/mamba3_prepare_util.h"
#include "ssm/ops/op_table.h"

namespace ssm {
namespace {

using testing::host;
using testing::random_tensor;
using namespace testing::m3;

struct FusedCase {
  PrepCase prep;
  int64_t chunk;      // rows (time steps x rank)
  bool state = true;  // a saved state; false: fresh
  bool bf16_state = false;  // the saved state stored in BF16
  int steps = 1;            // calls in a row, each from the state the last left
};

// {B, L, H, P, N, G, R, S, mimo}, chunk, state
const FusedCase kCases[] = {
    {{2, 21, 4, 8, 16, 1, 1, 4, false}, 8},         // SISO, partial last chunk
    {{1, 40, 2, 16, 32, 1, 1, 8, false}, 16},       // SISO, exact chunks
    {{1, 23, 2, 8, 16, 1, 4, 8, true}, 8},          // MIMO R = 4, 2 steps a chunk
    {{1, 45, 2, 8, 16, 1, 4, 4, true}, 64},         // MIMO R = 4, 16 steps a chunk
    {{2, 19, 4, 8, 16, 2, 2, 2, true}, 64},         // MIMO R = 2, 2 groups, one chunk
    {{1, 9, 2, 4, 8, 1, 4, 2, true}, 3},            // chunk smaller than R: 1 step a chunk
    {{3, 13, 6, 4, 8, 3, 2, 1, true}, 8, false},    // 3 groups, batch 3, fresh
    {{2, 17, 2, 4, 8, 1, 1, 2, false}, 64, false},  // SISO fresh, one chunk
    {{2, 1, 2, 4, 16, 1, 2, 3, true}, 64},          // one step (decoding)
    {{1, 1, 3, 8, 16, 1, 4, 4, true}, 64},          // one step, MIMO R = 4, 3 heads
    {{3, 1, 2, 4, 8, 1, 1, 2, false}, 8, false},    // one step, SISO, batch 3, fresh
    {{2, 1, 4, 16, 32, 2, 1, 8, false}, 64, true, false, 2},  // SISO, 2 groups, two steps
    {{3, 1, 4, 8, 16, 2, 2, 4, true}, 64, true, false, 2},    // MIMO R = 2, 2 groups, two steps
    {{2, 1, 3, 8, 16, 1, 4, 4, true}, 64, true, true, 2},     // MIMO R = 4, BF16 state, two steps
    {{2, 1, 2, 16, 32, 1, 1, 8, false}, 64, true, true},      // SISO, BF16 state
    {{1, 1, 2, 20, 16, 1, 2, 4, true}, 64, false, false, 2},  // MIMO fresh, rows past the last pass
    {{1, 1, 2, 40, 512, 1, 1, 4, false}, 64},                 // N 512: 16 rows a pass, 3 passes
    {{1, 1, 2, 64, 128, 1, 1, 16, false}, 64},                // the 130m SISO head: 2 rows a thread
};

// The state the scan reads: random, the same for both runs.
struct SavedState {
  Tensor ssm, k_prev, v_prev, D;
  SavedState(const PrepCase& c, uint64_t seed)
      : ssm(random_tensor({c.B, c.H, c.P, c.N}, seed)),
        k_prev(random_tensor({c.B, c.H, c.R, c.N}, seed + 1, -0.5f, 0.5f)),
        v_prev(random_tensor({c.B, c.H, c.R, c.P}, seed + 2)),
        D(random_tensor({c.H}, seed + 3)) {}
};

ops::Mamba3PrepareScanArgs args(const FusedCase& c, const PrepInputs& in, const SavedState& st,
                                const Place& pl) {
  const ops::Mamba3PrepareArgs prep = prepare_args(c.prep, in, pl, /*keep_phases=*/false);
  const ops::Mamba3ScanArgs scan{.chunk = c.chunk,
                                 .q = prep.q,
                                 .k = prep.k,
                                 .v = prep.v,
                                 .dt = prep.dt,
                                 .A = prep.A,
                                 .lam = prep.lam,
                                 .D = pl.put(st.D),
                                 .o = pl.nan(prep.v.shape()),
                                 .ssm = !c.state       ? Tensor()
                                        : c.bf16_state ? st.ssm.to_dtype(DType::kBF16).to(pl.device)
                                                       : pl.put(st.ssm),
                                 .k_prev = c.state ? pl.put(st.k_prev) : Tensor(),
                                 .v_prev = c.state ? pl.put(st.v_prev) : Tensor()};
  return {.prepare = prep, .scan = scan};
}

Named outputs(const ops::Mamba3PrepareScanArgs& a) {
  const ops::Mamba3PrepareArgs& p = a.prepare;
  const ops::Mamba3ScanArgs& s = a.scan;
  return {{"o", s.o},
          {"ssm", s.ssm},
          {"k_prev", s.k_prev},
          {"v_prev", s.v_prev},
          {"phase", p.phase},
          {"dt", p.dt},
          {"A", p.A},
          {"lam", p.lam},
          {"B_normed", p.B_normed},
          {"C_normed", p.C_normed},
          {"ang_rate", p.ang_rate}};
}

class Mamba3PrepareScan : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3PrepareScan, EqualsTheTwoOps) {
  for (const FusedCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.prep << " chunk " << c.chunk
                                      << (c.state ? (c.bf16_state ? " saved BF16 state" : " saved state") : " fresh")
                                      << " steps " << c.steps);
    const PrepInputs in(c.prep, 31 + c.prep.L);
    const SavedState st(c.prep, 57 + c.prep.L);
    // Both with F32 and with BF16 state products.
    for (int threads : {1, 2})
      for (bool bf16 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads" << (bf16 ? " bf16" : ""));
        Context ctx(GetParam(), threads);
        ops::Mamba3PrepareScanArgs two = args(c, in, st, Place::of(ctx));
        two.scan.bf16_state_products = bf16;
        // Each step after a copy to the host, as a decode step starts after
        // the ids' copy: on a GPU a step's kernels load the state before
        // waiting for the kernel before them (overlap_launch.h), which must
        // not be the last step's.
        for (int step = 0; step < c.steps; ++step) {
          if (step > 0) (void)host(two.prepare.phase);
          ops::mamba3_prepare(ctx, two.prepare);
          ops::mamba3_scan(ctx, two.scan);
        }
        ops::Mamba3PrepareScanArgs fused = args(c, in, st, Place::of(ctx));
        fused.scan.bf16_state_products = bf16;
        for (int step = 0; step < c.steps; ++step) {
          if (step > 0) (void)host(fused.prepare.phase);
          ops::mamba3_prepare_scan(ctx, fused);
        }
        const Named want = outputs(two), got = outputs(fused);
        for (size_t j = 0; j < want.size(); ++j) {
          if (!want[j].second.defined()) continue;
          EXPECT_TRUE(identical(got[j].second, want[j].second)) << want[j].first;
        }
      }
  }
}

TEST_P(Mamba3PrepareScan, RejectsKeptPhasesAndForeignInputs) {
  const FusedCase c{{1, 8, 2, 4, 8, 1, 2, 2, true}, 8};
  const PrepInputs in(c.prep, 3);
  const SavedState st(c.prep, 4);
  Context ctx(GetParam(), 1);
  if (!ctx.backend().ops().mamba3_prepare_scan) GTEST_SKIP() << "no fused kernel: the two ops";
  ops::Mamba3PrepareScanArgs a = args(c, in, st, Place::of(ctx));
  a.prepare.phases = Place::of(ctx).nan({1, 2, 8, 2});
  EXPECT_THROW(ops::mamba3_prepare_scan(ctx, a), Error);
  a = args(c, in, st, Place::of(ctx));
  a.scan.q = Place::of(ctx).nan(a.scan.q.shape());
  EXPECT_THROW(ops::mamba3_prepare_scan(ctx, a), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba3PrepareScan, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
