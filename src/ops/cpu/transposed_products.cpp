// Operand layouts and the product loop of transposed_products.h. Plain C++:
// only the kernel (x86_f32_gemm.cpp) needs the instruction set.
#include "ops/cpu/transposed_products.h"

#include <algorithm>
#include <cstring>

namespace ssm::cpu {
namespace {

// Weight rows per task of packed_product: a multiple of the tile's 6 rows
// and of 16 floats (two threads never write one cache line of y).
constexpr int64_t kProductRows = 96;
// Columns per task of the transpose: 16, the kernel's square blocks.
constexpr int64_t kTransposeBlock = 16;
// Blocks of 16 columns that pack_f32_columns copies per pass over the rows.
constexpr int64_t kColumnGroup = 8;

}  // namespace

F32PackedRows pack_f32_columns(const float* a, int64_t lda, int64_t rows, int64_t cols,
                               void* workspace, int64_t b0, int64_t b1) {
  auto* out = static_cast<float*>(workspace);
  // kColumnGroup blocks at a time, each row of a read once for all of them:
  // one block at a time read 64 bytes of every row per pass, a page apart
  // for the head's logits (a TLB miss per 16 floats copied).
  for (int64_t g0 = b0; g0 < b1; g0 += kColumnGroup) {
    const int64_t g1 = std::min(b1, g0 + kColumnGroup);
    const bool whole = g1 * 16 <= cols;
    for (int64_t k = 0; k < rows; ++k) {
      const float* src = a + k * lda;
      for (int64_t b = g0; b < g1; ++b) {
        float* dst = out + (b * rows + k) * 16;
        if (whole) {
          std::memcpy(dst, src + b * 16, 16 * sizeof(float));
          continue;
        }
        const int64_t n = std::min<int64_t>(16, cols - b * 16);
        int64_t l = 0;
        for (; l < n; ++l) dst[l] = src[b * 16 + l];
        for (; l < 16; ++l) dst[l] = 0.f;
      }
    }
  }
  return {.data = out, .M = cols, .K = rows};
}

F32PackedRows pack_f32_rows_parallel(ThreadPool& pool, const float* x, int64_t ldx, int64_t M,
                                     int64_t K, void* workspace) {
  pool.parallel_for((M + 15) / 16, [&](int64_t b0, int64_t b1) {
    pack_f32_rows(x, ldx, M, K, workspace, b0, b1);
  });
  return pack_f32_rows(x, ldx, M, K, workspace, 0, 0);
}

F32PackedRows pack_f32_columns_parallel(ThreadPool& pool, const float* a, int64_t lda, int64_t rows,
                                        int64_t cols, void* workspace) {
  pool.parallel_for((cols + 15) / 16, [&](int64_t b0, int64_t b1) {
    pack_f32_columns(a, lda, rows, cols, workspace, b0, b1);
  });
  return pack_f32_columns(a, lda, rows, cols, workspace, 0, 0);
}

void transpose_f32(ThreadPool& pool, const float* a, int64_t lda, int64_t rows, int64_t cols,
                   float* out) {
  const int64_t blocks = (cols + kTransposeBlock - 1) / kTransposeBlock;
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kTransposeBlock, c1 = std::min(cols, b1 * kTransposeBlock);
    transpose_f32_avx512(a + c0, lda, rows, c1 - c0, out + c0 * rows, rows);
  });
}

void packed_product(ThreadPool& pool, const F32PackedRows& x, const float* W, int64_t N,
                    bool accumulate, float* y, int64_t ldy) {
  pool.parallel_for_dynamic((N + kProductRows - 1) / kProductRows, [&](int64_t b0, int64_t b1) {
    const int64_t n0 = b0 * kProductRows, n1 = std::min(N, b1 * kProductRows);
    f32_gemm_avx512(
        x, {.W = W + n0 * x.K, .n = n1 - n0, .accumulate = accumulate, .y = y + n0, .ldy = ldy});
  });
}

void packed_product_transposed(ThreadPool& pool, const F32PackedRows& x, const float* W,
                               int64_t ldw, int64_t N, bool accumulate, float* y, int64_t ldy) {
  pool.parallel_for_dynamic((N + kProductRows - 1) / kProductRows, [&](int64_t b0, int64_t b1) {
    const int64_t n0 = b0 * kProductRows, n1 = std::min(N, b1 * kProductRows);
    f32_gemm_avx512(x, {.W = W + n0 * ldw,
                        .n = n1 - n0,
                        .accumulate = accumulate,
                        .y = y + n0 * ldy,
                        .ldy = ldy,
                        .ldw = ldw,
                        .transposed_y = true});
  });
}

}  // namespace ssm::cpu
