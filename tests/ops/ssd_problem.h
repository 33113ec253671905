// Random inputs of the SSD scan tests, made on the host and laid out on a
// backend as the Mamba-2 layer passes them.
#pragma once

#include <algorithm>

#include "ops/against_ref.h"
#include "ssm/ops/ssd.h"

namespace ssm::testing {

struct SsdProblem {
  int64_t B, L, H, P, N, G;
  Tensor x, Bm, Cm, dt, A, D, state;  // host, dense; D and state may be undefined

  // dt in (0.001, 0.5) as after softplus; A spans slow to fast decay.
  static SsdProblem random(int64_t B, int64_t L, int64_t H, int64_t P, int64_t N, int64_t G,
                           uint64_t seed, bool with_D = true, bool with_state = true) {
    SsdProblem p{B, L, H, P, N, G};
    p.x = random_tensor({B, L, H * P}, seed);
    p.Bm = random_tensor({B, L, G * N}, seed + 1);
    p.Cm = random_tensor({B, L, G * N}, seed + 2);
    p.dt = random_tensor({B, L, H}, seed + 3, 0.001f, 0.5f);
    p.A = random_tensor({H}, seed + 4, -4.f, -0.05f);
    if (with_D) p.D = random_tensor({H}, seed + 5);
    if (with_state) p.state = random_tensor({B, H, P, N}, seed + 6);
    return p;
  }
};

// Where the scan's inputs sit in memory.
enum class SsdLayout {
  kDense,      // each its own dense tensor
  kSharedBC,   // x dense; B and C the two halves of one row (the old engine's tests)
  kLayerRows,  // x | B | C one row of the conv output, dt and y inside wider rows
};

// The scan's arguments on ctx's device: inputs copied there in `layout`, y
// zeroed, the state copied (undefined stays undefined). y_rows, if given,
// receives all of the rows y is written in (their padding must survive).
inline ops::SsdScanArgs ssd_args_on(Context& ctx, const SsdProblem& p, SsdLayout layout,
                                    int64_t chunk, Tensor* y_rows = nullptr) {
  ops::SsdScanArgs a{.groups = p.G,
                     .chunk = chunk,
                     .A = on(ctx, p.A),
                     .D = on(ctx, p.D),
                     .state = on(ctx, p.state)};
  const int64_t HP = p.H * p.P, GN = p.G * p.N;
  const Tensor y0 = Tensor::zeros(DType::kF32, {p.B, p.L, HP});
  switch (layout) {
    case SsdLayout::kDense:
      a.x = on(ctx, p.x), a.B = on(ctx, p.Bm), a.C = on(ctx, p.Cm), a.dt = on(ctx, p.dt);
      a.y = on(ctx, y0);
      break;
    case SsdLayout::kSharedBC: {
      Tensor bc = Tensor::empty(DType::kF32, {p.B, p.L, 2 * GN});
      for (int64_t r = 0; r < p.B * p.L; ++r) {
        std::copy_n(p.Bm.data<float>() + r * GN, GN, bc.data<float>() + r * 2 * GN);
        std::copy_n(p.Cm.data<float>() + r * GN, GN, bc.data<float>() + r * 2 * GN + GN);
      }
      const Tensor bcd = on(ctx, bc);
      a.x = on(ctx, p.x), a.B = bcd.cols(0, GN), a.C = bcd.cols(GN, 2 * GN), a.dt = on(ctx, p.dt);
      a.y = on(ctx, y0);
      break;
    }
    case SsdLayout::kLayerRows: {
      Tensor xbc = Tensor::empty(DType::kF32, {p.B, p.L, HP + 2 * GN});
      const int64_t W = HP + 2 * GN;
      for (int64_t r = 0; r < p.B * p.L; ++r) {
        std::copy_n(p.x.data<float>() + r * HP, HP, xbc.data<float>() + r * W);
        std::copy_n(p.Bm.data<float>() + r * GN, GN, xbc.data<float>() + r * W + HP);
        std::copy_n(p.Cm.data<float>() + r * GN, GN, xbc.data<float>() + r * W + HP + GN);
      }
      const Tensor d = on(ctx, xbc);
      a.x = d.cols(0, HP), a.B = d.cols(HP, HP + GN), a.C = d.cols(HP + GN, W);
      a.dt = in_wider_rows(ctx, p.dt, 2, 3);
      const BlockOutput y = in_block(ctx, y0, 4, 1);
      a.y = y.view;
      if (y_rows) *y_rows = y.rows;
      break;
    }
  }
  if (y_rows && layout != SsdLayout::kLayerRows) *y_rows = a.y;
  return a;
}

}  // namespace ssm::testing
