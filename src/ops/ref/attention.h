// The reference attention kernels (ops/attention.h) as templates on the
// element type T: the op table runs them in float, tests run them in double
// to check each backward against finite differences of its forward. Every
// floating tensor of a call holds T; past stays I64. Sums run in double
// whatever T is.
#pragma once

#include "ssm/ops/attention.h"

namespace ssm::ref {

template <typename T>
void attention_append_kv(Context& ctx, const ops::AttentionArgs& a);
template <typename T>
void attention(Context& ctx, const ops::AttentionArgs& a);
template <typename T>
void attention_backward(Context& ctx, const ops::AttentionBackwardArgs& a);
template <typename T>
void rope_backward(Context& ctx, const ops::RopeBackwardArgs& a);

}  // namespace ssm::ref
