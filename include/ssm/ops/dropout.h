// Dropout of training's residual stream, in place:
//   t = t * keep / (1 - p),  keep = 0 with probability p, else 1
// where keep is a hash of (seed, step, site, element index) (ops/dropout_mask.h),
// not a random generator's state: the same mask on every backend and every
// thread count, and the backward regenerates it instead of storing it.
// The backward is the same product over the gradient, dx = keep dy / (1 - p).
#pragma once

#include <cstdint>

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct DropoutArgs {
  Tensor t;  // F32 with rows, overwritten
  // 0 <= p < 1: each element is zeroed with probability p.
  double p = 0;
  // Which mask: seed (the run's), step (a counter of the run's forward
  // passes) and site (which place of the model); the element index is the
  // element's position in t's rows, r * cols + c.
  uint64_t seed = 0, step = 0, site = 0;
};

void dropout(Context& ctx, const DropoutArgs& args);
// args.t holds dy, overwritten with dx (the forward's mask, regenerated).
void dropout_backward(Context& ctx, const DropoutArgs& args);

}  // namespace ssm::ops
