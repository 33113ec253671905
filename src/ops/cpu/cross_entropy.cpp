// The fused head and cross-entropy in blocks of rows of about 4M logits
// (16 MB), so that memory stays flat for large vocabularies: per block, the
// logits by one product split over the pool, the loss and softmax gradient
// row by row (in double), then df = g head (blocks of rows) and dhead += g^T f
// (blocks of vocabulary rows, each summing the block's rows in one product).
// The splits are the old linear's and linear_backward's; as there, which
// split the logits take depends on the thread count, so results may differ
// in the last bits between thread counts.
#include <algorithm>
#include <cmath>

#include "ops/cpu/blas.h"
#include "ops/cpu/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

constexpr int64_t kBlockLogits = int64_t{4} << 20;
constexpr int64_t kRowBlock = 16, kVocabBlockForward = 64, kVocabBlockBackward = 32;

// logits (n, V) = f (n rows) head[:V]^T: row blocks when there are rows
// enough for every thread, else blocks of the vocabulary.
void block_logits(ThreadPool& pool, const float* f, int64_t ldf, int64_t n, int64_t D,
                  const float* head, int64_t V, float* logits) {
  if (n >= 4 * pool.size() || V < kVocabBlockForward * pool.size()) {
    pool.parallel_for((n + kRowBlock - 1) / kRowBlock, [&](int64_t b0, int64_t b1) {
      const int64_t m0 = b0 * kRowBlock, m1 = std::min(n, b1 * kRowBlock);
      gemm(false, true, m1 - m0, V, D, 1.f, f + m0 * ldf, ldf, head, D, 0.f, logits + m0 * V, V);
    });
    return;
  }
  pool.parallel_for((V + kVocabBlockForward - 1) / kVocabBlockForward, [&](int64_t b0, int64_t b1) {
    const int64_t v0 = b0 * kVocabBlockForward, v1 = std::min(V, b1 * kVocabBlockForward);
    gemm(false, true, n, v1 - v0, D, 1.f, f, ldf, head + v0 * D, D, 0.f, logits + v0, V);
  });
}

// Per row with a target: its loss into loss[r] and, when grad_scale != 0,
// the row replaced by grad_scale (softmax - onehot(target)); rows without a
// target lose 0 and get a zero gradient.
void rows_loss(ThreadPool& pool, float* logits, int64_t n, int64_t V, const int64_t* targets,
               double grad_scale, double* loss) {
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* l = logits + r * V;
      const int64_t target = targets[r];
      loss[r] = 0;
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
      if (grad_scale == 0) continue;
      for (int64_t v = 0; v < V; ++v)
        l[v] = static_cast<float>(grad_scale * std::exp(static_cast<double>(l[v]) - lse));
      l[target] -= static_cast<float>(grad_scale);
    }
  });
}

double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  if (R == 0) return 0;
  const int64_t block = std::min(R, std::max<int64_t>(kRowBlock, kBlockLogits / V));
  ThreadPool& pool = ctx.pool();
  float* logits = ctx.arena().alloc(DType::kF32, {block, V}).data<float>();
  double* loss = ctx.arena().alloc(DType::kF64, {R}).data<double>();
  const ops::Rows<const float> f(a.f);
  const float* head = a.head.data<float>();
  const int64_t* targets = a.targets.data<int64_t>();
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t n = std::min(block, R - r0);
    block_logits(pool, f[r0], f.ld, n, D, head, V, logits);
    rows_loss(pool, logits, n, V, targets + r0, a.grad_scale, loss + r0);
    if (a.grad_scale == 0) continue;
    const ops::Rows<float> df(a.df);
    pool.parallel_for((n + kRowBlock - 1) / kRowBlock, [&](int64_t b0, int64_t b1) {
      const int64_t m0 = b0 * kRowBlock, m1 = std::min(n, b1 * kRowBlock);
      gemm(false, false, m1 - m0, D, V, 1.f, logits + m0 * V, V, head, D, 0.f, df[r0 + m0], df.ld);
    });
    if (!a.dhead.defined()) continue;
    float* dhead = ops::elements<float>(a.dhead);
    pool.parallel_for((V + kVocabBlockBackward - 1) / kVocabBlockBackward, [&](int64_t b0,
                                                                               int64_t b1) {
      const int64_t v0 = b0 * kVocabBlockBackward, v1 = std::min(V, b1 * kVocabBlockBackward);
      gemm(true, false, v1 - v0, D, n, 1.f, logits + v0, V, f[r0], f.ld, 1.f, dhead + v0 * D, D);
    });
  }
  double total = 0;
  for (int64_t r = 0; r < R; ++r) {
    total += loss[r];
    if (a.row_loss.defined()) ops::elements<double>(a.row_loss)[r] = loss[r];
  }
  return total;
}

}  // namespace

void add_loss_kernels(OpTable& t) { t.head_cross_entropy = &head_cross_entropy; }

}  // namespace ssm::cpu
