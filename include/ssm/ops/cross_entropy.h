// Next-token cross-entropy over the real vocabulary (SPEC §6), fused with the
// output head so that the (rows, V) logits exist one block of rows at a time:
//   logits = f head[:V]^T,  loss_r = -log softmax(logits_r)[target_r],
// and, when grad_scale != 0, with g = grad_scale (softmax - onehot(target)):
//   df = g head,  dhead += g^T f.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct HeadLossArgs {
  int64_t vocab = 0;  // V: the real vocabulary (head may have padded rows)
  Tensor f;           // (rows, D) F32 rows: final-norm outputs
  Tensor head;        // (>= V, D) F32 dense: embedding or lm_head
  // (rows) I64, -1 where no loss is taken: on the host, or on a device
  // backend's device (read in place; not checked against the vocabulary).
  Tensor targets;
  double grad_scale = 0;  // 0: loss only
  Tensor df;        // (rows, D) overwritten when grad_scale != 0
  Tensor dhead;     // (V or more, D) accumulated; undefined: not wanted
  Tensor row_loss;  // (rows) F64 on the host: each row's loss (0 without target); optional
  // Optional (1) F64 on the context's device: the sum of the row losses is
  // written here and the op returns 0, so that a device backend need not
  // wait for its work to end (training reads the loss back only when it
  // reports it). Not with row_loss.
  Tensor sum_out;
};
// Returns the sum of the row losses (0 with sum_out).
double head_cross_entropy(Context& ctx, const HeadLossArgs& a);

}  // namespace ssm::ops
