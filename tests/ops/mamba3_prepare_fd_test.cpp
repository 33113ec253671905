// The reference's mamba3_prepare_backward against centred differences of its
// own forward, both in double (the F64 instances, called directly): every
// in_proj segment and every parameter, J = sum(w * outputs) for random w.
// SISO and MIMO R = 2, 4, rope_fraction 0 to 1, 1 and 2 groups, the A floor
// active on some steps, a random starting phase.
#include <gtest/gtest.h>

#include <cstring>

#include "ops/mamba3_prepare_util.h"
#include "ops/ref/mamba3_ref.h"

namespace ssm {
namespace {

using namespace testing::m3;

// Centred differences with h = 1e-6 in double: truncation ~1e-12, rounding
// ~1e-16 |J| / h ~ 1e-9 of gradients of order one.
constexpr double kFdTol = 1e-6;

TEST(Mamba3RefPrepare, BackwardMatchesFiniteDifferences) {
  const PrepCase cases[] = {
      {2, 5, 4, 3, 8, 1, 1, 2, false}, {2, 5, 4, 3, 8, 2, 1, 4, false},
      {1, 4, 2, 3, 8, 1, 1, 0, false}, {2, 5, 4, 3, 8, 1, 2, 2, true},
      {2, 5, 4, 3, 8, 2, 2, 4, true},  {1, 4, 2, 2, 8, 1, 4, 4, true},
  };
  int floored = 0;
  for (const PrepCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Place pl = Place::f64();
    const PrepInputs in(c, 500 + c.R * 7 + c.G * 3 + c.S);
    const PrepGrads w(c, 600 + c.S, /*zero_params=*/true);
    const ops::Mamba3PrepareArgs a = prepare_args(c, in, pl);
    const Tensor phase0 = a.phase.clone();
    const Tensor wq = pl.put(w.dq), wk = pl.put(w.dk), wv = pl.put(w.dv);
    const Tensor wdt = pl.put(w.ddt), wA = pl.put(w.dA), wlam = pl.put(w.dlam);
    auto J = [&] {
      std::memcpy(const_cast<void*>(a.phase.raw()), phase0.raw(), phase0.nbytes());
      ref::mamba3_prepare<double>(a);
      return weighted_sum(a.q, wq) + weighted_sum(a.k, wk) + weighted_sum(a.v, wv) +
             weighted_sum(a.dt, wdt) + weighted_sum(a.A, wA) + weighted_sum(a.lam, wlam);
    };
    J();  // the forward the backward reads
    for (int64_t i = 0; i < a.A.numel(); ++i) floored += a.A.data<double>()[i] == -kTestFloor;
    const ops::Mamba3PrepareBackwardArgs g = prepare_backward_args(c, a, w, pl);
    ref::mamba3_prepare_backward<double>(g);

    expect_fd({{"x", g.dx, a.x},
               {"B", g.dB, a.B},
               {"C", g.dC, a.C},
               {"ddt", g.dddt, a.ddt},
               {"ddA", g.dddA, a.ddA},
               {"trap", g.dtrap, a.trap},
               {"ang", g.dang, a.ang},
               {"dt_bias", g.ddt_bias, a.dt_bias},
               {"B_norm", g.dB_norm, a.B_norm},
               {"C_norm", g.dC_norm, a.C_norm},
               {"B_bias", g.dB_bias, a.B_bias},
               {"C_bias", g.dC_bias, a.C_bias},
               {"mimo_x", g.dmimo_x, a.mimo_x}},
              J, kFdTol);
  }
  EXPECT_GT(floored, 0) << "the A floor should be active somewhere";
}

}  // namespace
}  // namespace ssm
