// Inputs of the Mamba-3 scan op: random q, k, v and step scalars in the
// ranges the prepare op produces, and a random saved state.
#pragma once

#include "ops/mamba3_test_util.h"

namespace ssm::testing::m3 {

struct ScanCase {
  int64_t B, L, H, P, N, R, chunk;
  bool state = true;  // a saved state (read and replaced); false: fresh, undefined
  bool skip = true;   // the D v skip term
};
inline std::ostream& operator<<(std::ostream& os, const ScanCase& c) {
  return os << "B" << c.B << " L" << c.L << " H" << c.H << " P" << c.P << " N" << c.N << " R" << c.R
            << " chunk " << c.chunk << (c.state ? " saved state" : " fresh")
            << (c.skip ? "" : " no D");
}

// Host F32 values.
struct ScanInputs {
  Tensor q, k, v, dt, A, lam, D, ssm, k_prev, v_prev;
  ScanInputs(const ScanCase& c, uint64_t seed) {
    const Shape qk{c.B, c.H, c.L, c.R, c.N}, hl{c.B, c.H, c.L};
    q = random_tensor(qk, seed + 1, -0.5f, 0.5f);
    k = random_tensor(qk, seed + 2, -0.5f, 0.5f);
    v = random_tensor({c.B, c.H, c.L, c.R, c.P}, seed + 3);
    dt = random_tensor(hl, seed + 4, 0.01f, 0.8f);
    A = random_tensor(hl, seed + 5, -3.f, -0.05f);
    lam = random_tensor(hl, seed + 6, 0.05f, 0.95f);
    D = maybe_random(c.skip, {c.H}, seed + 7);
    ssm = random_tensor({c.B, c.H, c.P, c.N}, seed + 8);
    k_prev = random_tensor({c.B, c.H, c.R, c.N}, seed + 9, -0.5f, 0.5f);
    v_prev = random_tensor({c.B, c.H, c.R, c.P}, seed + 10);
  }
  // Steps [t0, t1) of the per-step inputs, dense; the same saved state.
  ScanInputs steps(int64_t t0, int64_t t1) const {
    ScanInputs s = *this;
    for (Tensor* t : {&s.q, &s.k, &s.v, &s.dt, &s.A, &s.lam}) *t = t->slice(2, t0, t1).clone();
    return s;
  }
};

// Arguments at a place: o NaN, the state a copy of the inputs' (it is
// replaced), or undefined for a fresh sequence.
inline ops::Mamba3ScanArgs scan_args(const ScanCase& c, const ScanInputs& in, const Place& pl) {
  return {.chunk = c.chunk,
          .q = pl.put(in.q),
          .k = pl.put(in.k),
          .v = pl.put(in.v),
          .dt = pl.put(in.dt),
          .A = pl.put(in.A),
          .lam = pl.put(in.lam),
          .D = pl.put(in.D),
          .o = pl.nan(in.v.shape()),
          .ssm = c.state ? pl.put(in.ssm) : Tensor(),
          .k_prev = c.state ? pl.put(in.k_prev) : Tensor(),
          .v_prev = c.state ? pl.put(in.v_prev) : Tensor()};
}

}  // namespace ssm::testing::m3
