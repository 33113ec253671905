#include "ssm/train/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ssm/ops/gemm.h"
#include "ssm/train/ops/linear_backward.h"

namespace ssm::ops {

double cross_entropy_rows(float* logits, int64_t rows, int64_t V, const int64_t* targets,
                          double grad_scale, double* row_loss, ThreadPool& pool) {
  std::vector<double> loss(rows, 0.0);
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* l = logits + r * V;
      const int64_t target = targets[r];
      if (target < 0) {
        if (grad_scale != 0) std::fill(l, l + V, 0.f);
        continue;
      }
      float mx = l[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, l[v]);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
      const double lse = mx + std::log(sum);
      loss[r] = lse - l[target];
      if (grad_scale != 0) {
        for (int64_t v = 0; v < V; ++v)
          l[v] = static_cast<float>(grad_scale * std::exp(static_cast<double>(l[v]) - lse));
        l[target] -= static_cast<float>(grad_scale);
      }
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    total += loss[r];
    if (row_loss) row_loss[r] = loss[r];
  }
  return total;
}

double head_cross_entropy(const HeadLossArgs& a, ThreadPool& pool) {
  // Blocks of about 4M logits (16 MB) keep memory flat for large vocabularies.
  const int64_t block = a.block_rows > 0
                            ? a.block_rows
                            : std::max<int64_t>(16, (int64_t{4} << 20) / std::max<int64_t>(1, a.V));
  std::vector<float> logits(std::min(block, a.rows) * a.V);
  double total = 0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += block) {
    const int64_t n = std::min(block, a.rows - r0);
    linear(a.f + r0 * a.D, n, a.D, a.head, a.V, nullptr, logits.data(), pool);
    total += cross_entropy_rows(logits.data(), n, a.V, a.targets + r0, a.grad_scale,
                                a.row_loss ? a.row_loss + r0 : nullptr, pool);
    if (a.grad_scale == 0) continue;
    linear_backward({.M = n, .K = a.D, .N = a.V, .x = a.f + r0 * a.D, .W = a.head,
                     .dy = logits.data(), .dx = a.df + r0 * a.D, .dW = a.dhead},
                    pool);
  }
  return total;
}

}  // namespace ssm::ops
