// norm_linear (a projection of RMSNorm'd or gate-normalised rows) on every
// backend against ref's, which is its definition (the norm into a
// workspace, then linear): the Mamba-2 130m decode step's out projection
// (gated norm, residual accumulated) and in projection (RMSNorm), several
// norm groups with the norm before the gate, the plain gate, the weightless
// RMSNorm, inputs and outputs in column blocks of wider rows, rows too many
// for the few-row kernel, rows whose width is not a multiple of a 16-byte
// piece of W, one row at the widths where the cuda kernel keeps 8 and 16
// values a thread and just past them (composed), and several rows of one
// norm group (on cuda, composed: its norm at warp level takes one row).
#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

struct NormLinearCase {
  int64_t M, K, N;
  bool gated, with_weight;
  int64_t group;  // gated only; 0: all K
  bool norm_before_gate, with_bias, accumulate, wider;
  DType dtype;
};
const NormLinearCase kCases[] = {
    {1, 1536, 768, true, true, 0, false, false, true, false, DType::kBF16},  // 130m out_proj
    {1, 768, 200, false, true, 0, false, false, false, true, DType::kBF16},  // 130m in_proj's shape
    {1, 768, 3352, false, true, 0, false, false, false, false, DType::kBF16},  // 130m in_proj
    {1, 96, 20, true, true, 32, true, true, false, true, DType::kF32},
    {3, 96, 20, true, true, 32, true, true, false, true, DType::kF32},       // cuda: composed above 1 row
    {8, 64, 9, true, false, 0, false, true, true, false, DType::kF16},        // the plain gate
    {1, 40, 5, false, false, 0, false, false, true, true, DType::kF32},      // weightless RMSNorm
    {1, 64, 9, true, false, 0, false, true, true, false, DType::kF16},       // the plain gate, one row
    {12, 32, 16, true, true, 16, false, true, false, false, DType::kBF16},   // more than 8 rows
    {8, 768, 40, false, true, 0, false, true, true, false, DType::kBF16},    // 8 rows' RMSNorm
    {5, 256, 24, true, true, 0, false, false, true, false, DType::kF32},     // 5 rows' gated norm, one group
    {2, 512, 16, true, true, 0, true, true, false, false, DType::kF16},      // 2 rows, the gate after the norm
    {1, 36, 7, true, true, 12, true, false, false, true, DType::kBF16},      // 36: no 16-byte pieces
    {1, 1024, 12, true, true, 0, true, true, true, false, DType::kBF16},     // one group, gate after the norm
    {1, 2048, 24, false, true, 0, false, false, true, false, DType::kBF16},  // cuda: 16 values a thread
    {1, 2080, 8, true, true, 0, false, false, true, false, DType::kBF16},    // cuda: composed, too wide
    // cuda's split norm (a column over several warps) at 2 and 4 pieces a lane
    // (more columns than the emulator's one wave), and wider than it takes.
    {1, 1536, 200, true, true, 0, false, true, true, false, DType::kBF16},
    {1, 4096, 3, false, true, 0, false, false, false, false, DType::kF32},
    {1, 9216, 2, false, true, 0, false, false, true, false, DType::kBF16},
    // Groups narrower than K (Mamba-3's per-head norm before the gate, 64
    // channels): cuda's one-row kernels scale each group's pieces by its
    // factor, at 8 and 16 lanes a group (BF16 and F32 pieces), 2 lanes, and
    // a column over one warp (64 columns) or several (the 130m out_proj).
    {1, 1536, 768, true, true, 64, true, false, true, false, DType::kBF16},
    {1, 1536, 200, true, true, 64, true, false, true, false, DType::kBF16},
    {1, 512, 64, true, true, 64, true, true, false, false, DType::kF32},
    {1, 256, 40, true, true, 16, false, false, true, false, DType::kF16},
    {1, 768, 30, true, true, 256, true, false, true, false, DType::kBF16},  // 32 lanes a group
};

testing::Outputs run_case(Context& ctx, const NormLinearCase& s) {
  const Tensor x = on_rows(ctx, random_tensor({s.M, s.K}, 1, -2.f, 2.f), s.wider, 3, 5);
  const Tensor gate = s.gated ? on_rows(ctx, random_tensor({s.M, s.K}, 2, -3.f, 3.f), s.wider, 7, 1) : Tensor();
  const Tensor w = s.with_weight ? on(ctx, random_tensor({s.K}, 3, 0.5f, 1.5f)) : Tensor();
  const Tensor W = on(ctx, random_tensor({s.N, s.K}, 4, -0.1f, 0.1f).to_dtype(s.dtype));
  const Tensor bias = s.with_bias ? on(ctx, random_tensor({s.N}, 5)) : Tensor();
  const testing::BlockOutput y = in_block(ctx, random_tensor({s.M, s.N}, 6), s.wider, 2, 2);
  ops::norm_linear(ctx, {.x = x,
                         .gate = gate,
                         .norm_weight = w,
                         .group = s.group,
                         .eps = 1e-5f,
                         .norm_before_gate = s.norm_before_gate,
                         .W = W,
                         .bias = bias,
                         .y = y.view,
                         .accumulate = s.accumulate});
  return testing::outputs({{"y", y.rows}});
}

class NormLinearTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NormLinearTest, MatchesRef) {
  for (const NormLinearCase& s : kCases) {
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " K " << s.K << " N " << s.N << " gated "
                                      << s.gated << " " << dtype_name(s.dtype));
    // The GPU widens stored weights exactly (F32 products); the cpu's BF16
    // and F16 paths may round the activations.
    const testing::Tolerance tol = testing::kGpuTests ? testing::Tolerance{} : testing::tolerance_for(s.dtype);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) { return run_case(ctx, s); },
                                {.tol = tol});
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NormLinearTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
