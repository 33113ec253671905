// The (token, slot) pairs p = t k + j of routed_experts grouped by expert,
// planned on the host for the forward (hybrid_ops.cpp) and the backward
// (hybrid_backward_ops.cpp): a stable counting sort, so the order within an
// expert is the pairs' order and results do not depend on it.
#pragma once

#include <cstdint>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm::cuda {

struct ExpertOrder {
  std::vector<int64_t> begin;  // E + 1: expert e's pairs are sorted[begin[e] .. begin[e + 1])
  Tensor order;                // (2, P) I64 on the host: row 0 sorted[i] = p, row 1 pos[p] = i
};

// idx: P expert ids in [0, E) (moe_route's choice, host).
inline ExpertOrder order_pairs_by_expert(const int64_t* idx, int64_t P, int64_t E) {
  ExpertOrder o;
  o.begin.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t p = 0; p < P; ++p) ++o.begin[static_cast<size_t>(idx[p] + 1)];
  for (int64_t e = 0; e < E; ++e) o.begin[e + 1] += o.begin[e];
  o.order = Tensor::empty(DType::kI64, {2, P});
  int64_t* sorted = o.order.data<int64_t>();
  int64_t* pos = sorted + P;
  std::vector<int64_t> fill(o.begin.begin(), o.begin.end() - 1);
  for (int64_t p = 0; p < P; ++p) {
    const int64_t i = fill[static_cast<size_t>(idx[p])]++;
    sorted[i] = p;
    pos[p] = i;
  }
  return o;
}

}  // namespace ssm::cuda
