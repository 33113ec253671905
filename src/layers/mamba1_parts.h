// What the Mamba-1 forward keeps for its backward.
#pragma once

#include "ssm/layers/sequence_layer.h"

namespace ssm {

struct Mamba1Activations : LayerActivations {
  // in_proj's [x | z]; the conv output u; x_proj's [dt | B | C] before and
  // after the norms (the same tensor without them); dt_proj's output; the scan's.
  Tensor xz, u, dbc_raw, dbc, dt_raw, ys;
};

}  // namespace ssm
