// What the Mamba-2 forward and backward share: where each intermediate
// lives among the column blocks, and what the forward keeps.
#pragma once

#include "ssm/layers/mixer_config.h"
#include "ssm/layers/sequence_layer.h"

namespace ssm {

// The column blocks of in_proj's output, [z | xBC (conv input) | dt (raw)],
// and of the conv output, [x | B | C].
struct Mamba2Split {
  int64_t d_inner, conv_dim, GN, H;
  explicit Mamba2Split(const Mamba2Config& c)
      : d_inner(c.d_inner()), conv_dim(c.conv_dim()), GN(c.ngroups * c.d_state), H(c.nheads()) {}
  Tensor z(const Tensor& zxbcdt) const { return zxbcdt.cols(0, d_inner); }
  Tensor conv_in(const Tensor& zxbcdt) const { return zxbcdt.cols(d_inner, d_inner + conv_dim); }
  Tensor dt(const Tensor& zxbcdt) const {
    return zxbcdt.cols(d_inner + conv_dim, d_inner + conv_dim + H);
  }
  Tensor x(const Tensor& xbc) const { return xbc.cols(0, d_inner); }
  Tensor B(const Tensor& xbc) const { return xbc.cols(d_inner, d_inner + GN); }
  Tensor C(const Tensor& xbc) const { return xbc.cols(d_inner + GN, d_inner + 2 * GN); }
};

// The forward's intermediates, in the order it makes them (not the gated
// norm's output: the backward makes it again from ys and z).
struct Mamba2Activations : LayerActivations {
  Tensor zxbcdt, xbc, dt, A, ys;
};

}  // namespace ssm
