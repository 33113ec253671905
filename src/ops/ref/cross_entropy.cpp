// The head's logits row by row in double, the loss by log-sum-exp, and the
// gradient g = grad_scale (softmax - onehot) taken back through the head:
// df row by row, dhead summed in double over a block of rows at a time (so
// that the block's g stays small for large vocabularies).
#include "ops/ref/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

// Doubles of g held at once.
constexpr int64_t kBlockDoubles = int64_t{1} << 20;

// The loss of row f (D wide) against target over the first V rows of head,
// leaving in g the row's grad_scale (softmax - onehot(target)).
template <typename T>
double row_loss(const T* f, const T* head, int64_t D, int64_t V, int64_t target, double grad_scale,
                double* g) {
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    double logit = 0;
    for (int64_t d = 0; d < D; ++d) logit += static_cast<double>(f[d]) * head[v * D + d];
    g[v] = logit;
    mx = std::max(mx, logit);
  }
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(g[v] - mx);
  const double lse = mx + std::log(sum), loss = lse - g[target];
  for (int64_t v = 0; v < V; ++v) g[v] = grad_scale * (std::exp(g[v] - lse) - (v == target));
  return loss;
}

}  // namespace

template <typename T>
double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  const int64_t block = std::clamp<int64_t>(kBlockDoubles / V, 1, std::max<int64_t>(R, 1));
  const int64_t* targets = a.targets.data<int64_t>();
  const T* head = a.head.data<T>();
  const bool grad = a.grad_scale != 0;
  double* g = ctx.arena().alloc(DType::kF64, {block, V}).data<double>();
  double total = 0;
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t n = std::min(block, R - r0);
    for (int64_t r = r0; r < r0 + n; ++r) {
      double* gr = g + (r - r0) * V;
      double loss = 0;
      if (targets[r] >= 0)
        loss = row_loss(ops::row<T>(a.f, r), head, D, V, targets[r], a.grad_scale, gr);
      else
        std::fill(gr, gr + V, 0.0);
      total += loss;
      if (a.row_loss.defined()) ops::elements<double>(a.row_loss)[r] = loss;
      if (!grad) continue;
      for (int64_t d = 0; d < D; ++d) {
        double s = 0;
        for (int64_t v = 0; v < V; ++v) s += gr[v] * head[v * D + d];
        ops::row<T>(a.df, r)[d] = static_cast<T>(s);
      }
    }
    if (!grad || !a.dhead.defined()) continue;
    for (int64_t v = 0; v < V; ++v)
      for (int64_t d = 0; d < D; ++d) {
        double s = 0;
        for (int64_t r = r0; r < r0 + n; ++r) s += g[(r - r0) * V + v] * ops::row<T>(a.f, r)[d];
        T& out = ops::elements<T>(a.dhead)[v * D + d];
        out = static_cast<T>(out + s);
      }
  }
  return total;
}

template double head_cross_entropy<float>(Context&, const ops::HeadLossArgs&);
template double head_cross_entropy<double>(Context&, const ops::HeadLossArgs&);

void add_loss_kernels(OpTable& t) { t.head_cross_entropy = &head_cross_entropy<float>; }

}  // namespace ssm::ref
