// What the Mamba-3 forward and backward share: the column blocks of
// in_proj's output, the prepare/scan/output arguments built from the kept
// intermediates, and what the forward keeps.
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"
#include "ssm/ops/mamba3.h"

namespace ssm {

// [z | x | B | C | ddt | ddA | trap | ang], widths
// d_inner | d_inner | RGN | RGN | H | H | H | S.
struct Mamba3Split {
  int64_t d_inner, RGN, H, S;
  explicit Mamba3Split(const Mamba3Config& c)
      : d_inner(c.d_inner()), RGN(c.rank() * c.ngroups * c.d_state), H(c.nheads()),
        S(c.n_angles()) {}
  Tensor z(const Tensor& p) const { return p.cols(0, d_inner); }
  Tensor x(const Tensor& p) const { return p.cols(d_inner, 2 * d_inner); }
  Tensor B(const Tensor& p) const { return p.cols(2 * d_inner, 2 * d_inner + RGN); }
  Tensor C(const Tensor& p) const { return p.cols(2 * d_inner + RGN, 2 * d_inner + 2 * RGN); }
  Tensor ddt(const Tensor& p) const { return block(p, 0, H); }
  Tensor ddA(const Tensor& p) const { return block(p, H, 2 * H); }
  Tensor trap(const Tensor& p) const { return block(p, 2 * H, 3 * H); }
  Tensor ang(const Tensor& p) const { return block(p, 3 * H, 3 * H + S); }

 private:
  Tensor block(const Tensor& p, int64_t b, int64_t e) const {
    const int64_t at = 2 * d_inner + 2 * RGN;
    return p.cols(at + b, at + e);
  }
};

// The forward's intermediates: in_proj's output, the phase the prepare op
// started from, and the prepare, scan and output ops' arguments as they ran
// (states undefined: training starts fresh), less what the prepare op made
// (Mamba3Layer::prepare_again makes it again).
struct Mamba3Activations : LayerActivations {
  Tensor proj, phase0;
  ops::Mamba3PrepareArgs prepare;
  ops::Mamba3ScanArgs scan;
  ops::Mamba3OutputArgs output;
  // Drops the prepare op's outputs, which lived in the forward's arena.
  void forget_prepare_outputs() {
    for (Tensor* t : {&prepare.B_normed, &prepare.C_normed, &prepare.ang_rate, &prepare.dt, &prepare.A,
                      &prepare.lam, &prepare.q, &prepare.k, &prepare.v, &prepare.phases, &scan.q, &scan.k,
                      &scan.v, &scan.dt, &scan.A, &scan.lam})
      *t = Tensor();
  }
};

}  // namespace ssm
