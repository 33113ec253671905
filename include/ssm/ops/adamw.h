// One AdamW update (decoupled weight decay, as PyTorch's AdamW) of a run of
// parameter elements:
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p = p (1 - lr wd) - lr (m / bc1) / (sqrt(v / bc2) + eps)
// with bias corrections bc1 = 1 - b1^step, bc2 = 1 - b2^step.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct AdamWArgs {
  Tensor param, grad, m, v;  // equal element counts, F32 dense
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for the bias corrections
};
void adamw(Context& ctx, const AdamWArgs& a);

}  // namespace ssm::ops
