// The fused head and cross-entropy in blocks of rows of about 4M logits
// (16 MB), so that memory stays flat for large vocabularies: per block, the
// logits by one product split over the pool, the loss and softmax gradient
// row by row (sums in double), then df = g head (blocks of rows) and dhead += g^T f
// (blocks of vocabulary rows, each summing the block's rows in one product).
// The softmax's exponentials are float vector lanes, summed in double.
// The splits are the old linear's and linear_backward's; as there, which
// split the logits take depends on the thread count, so results may differ
// in the last bits between thread counts.
#include <algorithm>
#include <cmath>

#include "ops/cpu/blas.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/transposed_products.h"
#include "ops/cpu/vec_math.h"
#include "ops/cpu/x86_kernels.h"
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
      // The exponentials in float lanes (each <= 1), their sum in double;
      // the softmax is then each one over the sum.
      const float mx = max_of(l, V), at_target = l[target];
      const double sum = exp_shifted_sum(l, V, mx);
      loss[r] = mx + std::log(sum) - at_target;
      if (grad_scale == 0) continue;
      const auto k = static_cast<float>(grad_scale / sum);
      for (int64_t v = 0; v < V; ++v) l[v] *= k;
      l[target] -= static_cast<float>(grad_scale);
    }
  });
}

// The AVX-512 path: every product on the kernel of x86_f32_gemm.cpp with
// its operands laid out once. Blocks of up to kBlockLogitsAvx512 logits (a
// multiple of 64 rows where that many fit: the kernel's tiles), and per
// call the head's columns packed in chunks of kHeadChunk vocabulary rows
// (each chunk D packed rows of kHeadChunk), so that df = g head runs chunk
// by chunk with both operands in cache: df^T = head^T g^T, the chunk's
// packed columns against g's rows as stored, written transposed into df's
// rows (g is not packed). Taken while that copy of the head stays under
// kMaxHeadCopy floats. The products' tasks are handed out as the threads
// come free (parallel_for_dynamic): each output is one sum in a fixed order
// whichever thread runs its task.
constexpr int64_t kBlockLogitsAvx512 = int64_t{16} << 20;
constexpr int64_t kHeadChunk = 256;
constexpr int64_t kMaxHeadCopy = int64_t{128} << 20;
// Vocabulary rows per task of dhead += g^T f: a multiple of the tile's 64
// packed rows.
constexpr int64_t kDheadRows = 256;

bool avx512_path(const ops::HeadLossArgs& a) {
  return cpu_has_avx512() && a.vocab * a.f.cols() <= kMaxHeadCopy;
}

double head_cross_entropy_avx512(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  int64_t block = std::max<int64_t>(kRowBlock, kBlockLogitsAvx512 / V);
  if (block >= 64) block = block / 64 * 64;
  block = std::min(R, block);
  ThreadPool& pool = ctx.pool();
  Arena& arena = ctx.arena();
  Arena::Scope scope(arena);
  auto floats = [&](int64_t n) { return ops::elements<float>(arena.alloc(DType::kF32, {n})); };
  float* logits = floats(block * V);
  double* loss = ops::elements<double>(arena.alloc(DType::kF64, {R}));
  void* f_packed = floats(f32_pack_bytes(block, D) / 4);
  const ops::Rows<const float> f(a.f);
  const float* head = a.head.data<float>();
  const int64_t* targets = a.targets.data<int64_t>();
  const bool grads = a.grad_scale != 0, dhead_wanted = grads && a.dhead.defined();
  const int64_t chunks = (V + kHeadChunk - 1) / kHeadChunk;
  auto chunk_size = [&](int64_t c) { return std::min(kHeadChunk, V - c * kHeadChunk); };
  // Chunk c of the head's columns packed (D packed rows of chunk_size(c),
  // blocks of 16 columns), at c kHeadChunk D16.
  const int64_t D16 = (D + 15) / 16 * 16;
  float* head_cols = grads ? floats(V * D16) : nullptr;
  if (grads)
    pool.parallel_for(chunks, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t v0 = c * kHeadChunk;
        pack_f32_columns(head + v0 * D, D, chunk_size(c), D, head_cols + v0 * D16, 0, D16 / 16);
      }
    });
  // g's columns packed as rows (V rows of n) for dhead; f^T (D rows of n).
  void* g_columns = dhead_wanted ? floats(f32_pack_bytes(V, block) / 4) : nullptr;
  float* f_t = dhead_wanted ? floats(D * block) : nullptr;
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t n = std::min(block, R - r0);
    packed_product(pool, pack_f32_rows_parallel(pool, f[r0], f.ld, n, D, f_packed), head, V, false,
                   logits, V);
    rows_loss(pool, logits, n, V, targets + r0, a.grad_scale, loss + r0);
    if (!grads) continue;
    // df = g head, summed chunk by chunk of the vocabulary in order (each
    // chunk's sum added to df); tasks of 96 columns of df (a multiple of 16
    // floats: whole vectors of df's rows).
    const ops::Rows<float> df(a.df);
    constexpr int64_t kDfColumns = 96;
    pool.parallel_for_dynamic((D + kDfColumns - 1) / kDfColumns, [&](int64_t b0, int64_t b1) {
      const int64_t d0 = b0 * kDfColumns, d1 = std::min(D, b1 * kDfColumns);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t vc = chunk_size(c);
        const F32PackedRows hc{
            .data = head_cols + c * kHeadChunk * D16 + d0 * vc, .M = d1 - d0, .K = vc};
        f32_gemm_avx512(hc, {.W = logits + c * kHeadChunk,
                             .n = n,
                             .accumulate = c > 0,
                             .y = df[r0] + d0,
                             .ldy = df.ld,
                             .ldw = V,
                             .transposed_y = true});
      }
    });
    if (!dhead_wanted) continue;
    // dhead += g^T f: g's columns as packed rows against the rows of f^T,
    // tasks of kDheadRows vocabulary rows.
    pack_f32_columns_parallel(pool, logits, V, n, V, g_columns);
    transpose_f32(pool, f[r0], f.ld, n, D, f_t);
    float* dhead = ops::elements<float>(a.dhead);
    const auto* gcol = static_cast<const float*>(g_columns);
    pool.parallel_for_dynamic((V + kDheadRows - 1) / kDheadRows, [&](int64_t b0, int64_t b1) {
      const int64_t v0 = b0 * kDheadRows, v1 = std::min(V, b1 * kDheadRows);
      f32_gemm_avx512({.data = gcol + v0 * n, .M = v1 - v0, .K = n},
                      {.W = f_t, .n = D, .accumulate = true, .y = dhead + v0 * D, .ldy = D});
    });
  }
  double total = 0;
  for (int64_t r = 0; r < R; ++r) {
    total += loss[r];
    if (a.row_loss.defined()) ops::elements<double>(a.row_loss)[r] = loss[r];
  }
  return total;
}

double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  if (R == 0) return 0;
  if (avx512_path(a)) return head_cross_entropy_avx512(ctx, a);
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
