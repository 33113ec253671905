// The reference embedding kernels (ops/embedding.h) as templates on the
// element type T of table, out, dout and dtable: float in the op table,
// double in tests of the backward against finite differences.
#pragma once

#include "ssm/ops/embedding.h"

namespace ssm::ref {

template <typename T>
void embedding(Context& ctx, const ops::EmbeddingArgs& a);
template <typename T>
void embedding_backward(Context& ctx, const ops::EmbeddingBackwardArgs& a);

}  // namespace ssm::ref
