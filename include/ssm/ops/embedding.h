// Embedding lookup: out[r] = table[ids[r]], and its backward, which adds each
// row's gradient into the row of its id (sums in a fixed order, so results do
// not depend on the thread count).
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct EmbeddingArgs {
  Tensor ids;    // (...) I64 or I32 dense, each in [0, table rows): checked by the caller
  Tensor table;  // (V, D) dense: F32, or F16, BF16, Q8 (a head converted for inference)
  Tensor out;    // (..., D) rows, ids.numel() rows
  float scale = 1.f;  // out = scale * table[ids] (embedding multipliers)
};
void embedding(Context& ctx, const EmbeddingArgs& a);

struct EmbeddingBackwardArgs {
  Tensor ids;     // as the forward
  Tensor dout;    // (..., D) rows
  float scale = 1.f;
  Tensor dtable;  // (V, D) dense, accumulated
  // Optional: the same ids on the host (dense, the same dtype), when the
  // caller has them: a device backend groups the rows by id on the host and
  // need not read ids back (which would wait for the device's work).
  Tensor host_ids;
};
void embedding_backward(Context& ctx, const EmbeddingBackwardArgs& a);

}  // namespace ssm::ops
