// Kernels written with x86 intrinsics for instructions that Debian's Highway
// (1.0.3) does not expose: the AVX-512 VNNI byte dot product (vpdpbusd) for
// Q8 weights and the AVX-512 BF16 pair dot product (vdpbf16ps) for BF16
// weights. Each is compiled for its instruction set only (function target
// attributes, not a global -m flag) and called only where the CPU reports
// the feature at run time; otherwise callers take the portable Highway
// kernels of lowp_linear.h.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// The CPU has AVX-512 F/BW/VL with VNNI (vpdpbusd).
bool cpu_has_avx512_vnni();
// The CPU has AVX-512 F/BW/VL with BF16 (vdpbf16ps).
bool cpu_has_avx512_bf16();
// It has, and vdpbf16ps outruns the F32 multiply-add there (measured once,
// x86_bf16_rate.cpp; SSM_CPU_BF16_DOT=0|1 forces it): the BF16 weights'
// products then use it, else they widen to F32.
bool cpu_bf16_dot_products_fast();

// ---- Q8 weights x activations quantised on the fly (VNNI) -----------------

// Activation rows quantised to int8 with one scale per block of kQ8ActBlock
// values (scale = max |x| in the block / 127, value = round(x / scale)).
// The rows are padded with zeros to Kp, a multiple of 64.
inline constexpr int64_t kQ8ActBlock = 128;

struct Q8Activations {
  const int8_t* q = nullptr;  // M rows of Kp values
  int64_t Kp = 0;
  const float* scales = nullptr;  // M rows of blocks(K) scales
  int64_t blocks = 0;
  // Per row: 128 * sum_b scale_b * sum_{k in b} q_k, the term the unsigned
  // weight bytes (w + 128) add to every dot product.
  const float* bias128 = nullptr;
  int64_t M = 0;
};

inline int64_t q8_padded_width(int64_t K) { return (K + 63) / 64 * 64; }
inline int64_t q8_act_blocks(int64_t K) { return (K + kQ8ActBlock - 1) / kQ8ActBlock; }
// Bytes of workspace quantize_q8_rows needs for M rows of K.
inline int64_t q8_workspace_bytes(int64_t M, int64_t K) {
  return M * q8_padded_width(K) + 4 * M * (q8_act_blocks(K) + 1);
}
// Quantises x (M rows of K, row stride ldx) into `workspace` (64-byte
// aligned, q8_workspace_bytes(M, K) bytes); the result points into it.
Q8Activations quantize_q8_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace);

// y[m][j] = wscale[j] * sum_k W[j][k] xq[m][k] (+ bias[j]) (+ y[m][j] when
// accumulating), for j < n; W is int8 with row stride K. Requires
// cpu_has_avx512_vnni().
struct Q8GemvJob {
  const int8_t* W = nullptr;
  int64_t K = 0;
  const float* wscale = nullptr;
  int64_t wscale_stride = 1;
  int64_t n = 0;
  const float* bias = nullptr;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
};
void q8_gemv_vnni(const Q8Activations& xq, const Q8GemvJob& job);

}  // namespace ssm::cpu

namespace ssm::cpu {

// ---- BF16 weights x activations rounded to BF16 (AVX-512 BF16) ------------

// Activations packed for bf16_gemm_avx512: blocks of 16 rows; in a block,
// for each pair of columns (2p, 2p + 1) the 16 rows' pairs of BF16 values
// as 32-bit words (the operand layout of vdpbf16ps), zeros past M and K.
struct Bf16PackedRows {
  const uint32_t* data = nullptr;
  int64_t M = 0, K = 0;
  int64_t pairs = 0;  // (K + 1) / 2 words per row of a block
};
inline int64_t bf16_pair_count(int64_t K) { return (K + 1) / 2; }
// Bytes of workspace pack_bf16_rows needs.
inline int64_t bf16_pack_bytes(int64_t M, int64_t K) {
  return (M + 15) / 16 * 16 * bf16_pair_count(K) * 4;
}
inline int64_t bf16_row_blocks(int64_t M) { return (M + 15) / 16; }
// Rounds blocks [b0, b1) of the rows of x (M rows of K, row stride ldx) to
// BF16 (nearest even) into `workspace` and returns the whole packed matrix
// (complete once every block is packed: blocks can be packed in parallel).
// Requires cpu_has_avx512_bf16().
Bf16PackedRows pack_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace,
                              int64_t b0, int64_t b1);

// y[m][j] = sum_k W[j][k] x[m][k] (+ bias[j]) (+ y[m][j] when accumulating)
// for every packed row m and j < n; W is BF16 with row stride K, read in its
// stored layout (no packing). Requires cpu_has_avx512_bf16().
struct Bf16GemmJob {
  const uint16_t* W = nullptr;
  int64_t n = 0;
  const float* bias = nullptr;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
};
void bf16_gemm_avx512(const Bf16PackedRows& x, const Bf16GemmJob& job);

// Decoding (x86_bf16_gemv.cpp): M activation rows rounded to BF16 (nearest
// even), each row `width` values, zeros past K.
struct Bf16GemvRows {
  const uint16_t* data = nullptr;
  int64_t M = 0;
  int64_t width = 0;
};
inline int64_t bf16_gemv_width(int64_t K) { return (K + 31) / 32 * 32; }
// Bytes of workspace round_bf16_rows needs.
inline int64_t bf16_gemv_workspace_bytes(int64_t M, int64_t K) {
  return M * bf16_gemv_width(K) * 2;
}
// Rounds the M rows of x (K values each, row stride ldx) into `workspace`.
// Requires cpu_has_avx512_bf16().
Bf16GemvRows round_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace);

// y[m][j] = sum_k W[j][k] x[m][k] (+ bias[j]) (+ y[m][j] when accumulating)
// for every row m of x and j < n, W BF16 with row stride K. Each weight row
// is read once per 8 rows of x, and each output is the same bits whichever
// rows share the call. Requires cpu_has_avx512_bf16().
struct Bf16GemvJob {
  const uint16_t* W = nullptr;
  int64_t K = 0;
  int64_t n = 0;
  const float* bias = nullptr;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
};
void bf16_gemv_avx512(const Bf16GemvRows& x, const Bf16GemvJob& job);

}  // namespace ssm::cpu

namespace ssm::cpu {

// ---- F32 products on AVX-512 ----------------------------------------------

// The CPU has AVX-512 F/BW/VL/DQ (and FMA).
bool cpu_has_avx512();

// out[c * ldo + r] = a[r * lda + c] for r < rows, c < cols (x86_transpose.cpp):
// blocks of 16 x 16 in registers, the edges one value at a time. Requires
// cpu_has_avx512().
void transpose_f32_avx512(const float* a, int64_t lda, int64_t rows, int64_t cols, float* out,
                          int64_t ldo);

// Activations packed for f32_gemm_avx512: blocks of 16 rows; in a block,
// for each column k the 16 rows' values, zeros past M.
struct F32PackedRows {
  const float* data = nullptr;
  int64_t M = 0, K = 0;
};
inline int64_t f32_pack_bytes(int64_t M, int64_t K) { return (M + 15) / 16 * 16 * K * 4; }
// Packs blocks [b0, b1) of the rows of x (M rows of K, row stride ldx) into
// `workspace` and returns the whole packed matrix (blocks can be packed in
// parallel). Requires cpu_has_avx512().
F32PackedRows pack_f32_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace,
                            int64_t b0, int64_t b1);

// y[m][j] = sum_k W[j][k] x[m][k] (+ bias[j]) (+ y[m][j] when accumulating)
// for every packed row m and j < n; W is F32 with row stride ldw (0: K),
// read as stored. With transposed_y the same sums go to y[j][m] instead
// (rows of y are W's rows: a product whose packed operand is the transposed
// one, written without a transpose). Each output is one F32 sum over k in
// order, whatever the tiling. Requires cpu_has_avx512().
struct F32GemmJob {
  const float* W = nullptr;
  int64_t n = 0;
  const float* bias = nullptr;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t ldw = 0;
  bool transposed_y = false;
};
void f32_gemm_avx512(const F32PackedRows& x, const F32GemmJob& job);

}  // namespace ssm::cpu

namespace ssm::cpu {

// ---- Small F32 products on AVX-512 (x86_small_gemm.cpp) --------------------

// Dimensions small_gemm_avx512 takes: each at most kSmallGemmMax, and a
// transposed B of at most kSmallGemmPack values (its transpose goes on the
// stack).
inline constexpr int64_t kSmallGemmMax = 256;
// 32768: the 256 x 128 keys of a Mamba-3 MIMO R=4 chunk of 64 steps.
inline constexpr int64_t kSmallGemmPack = 32768;
bool small_gemm_fits(bool trans_b, int64_t M, int64_t N, int64_t K);

// gemm of blas.h (C = alpha op(A) op(B) + beta C, row strides; beta 0: C is
// not read) for small_gemm_fits shapes; each output is one F32 sum over k
// in ascending order. Requires cpu_has_avx512().
void small_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                       float* C, int64_t ldc);

// gemm_causal_scores of blas.h with B transposed once for all its row
// blocks, where the CPU has AVX-512 and the shape fits (small_gemm_fits with
// a transposed B); false: nothing done.
bool small_causal_scores(int64_t M, int64_t K, int64_t unit, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float* C, int64_t ldc);

}  // namespace ssm::cpu

namespace ssm::cpu {

// ---- The scans' state products with BF16 inputs (x86_bf16_pairs.cpp) -------
// Operands are 32-bit words of two BF16 values (nearest even), the lower
// half first: the layout of vdpbf16ps. All require cpu_has_avx512_bf16().

// out[r * ldo + j] = (s_r a[r][2j], s_r a[r][2j + 1]) for r < rows,
// j < (cols + 1) / 2, the value past cols zero; s = scale (null: all 1).
void bf16_row_words(const float* a, int64_t lda, const float* scale, int64_t rows, int64_t cols,
                    uint32_t* out, int64_t ldo);
// out[j * ldo + c] = (s_2j a[2j][c], s_2j+1 a[2j + 1][c]) for
// j < (rows + 1) / 2, c < cols, the value past the last row zero; s = scale
// (null: all 1).
void bf16_row_pairs(const float* a, int64_t lda, const float* scale, int64_t rows, int64_t cols,
                    uint32_t* out, int64_t ldo);
// C[m][n] = s_m sum_{j < pairs} A(m, j) . B(j, n) + beta C[m][n] for m < M,
// n < N, where A(m, j) = A[m * a_row + j * a_col], B(j, n) = B[j * ldb + n],
// a . b = a.lo b.lo + a.hi b.hi summed in F32 and s = row_scale (null: all
// 1); beta 0: C is not read.
void bf16_pair_product(int64_t M, int64_t N, int64_t pairs, const uint32_t* A, int64_t a_row,
                       int64_t a_col, const uint32_t* B, int64_t ldb, const float* row_scale,
                       float beta, float* C, int64_t ldc);

// The chunk's two products (blas.h's gemm_causal_scores and gemm_causal)
// with BF16 inputs. C (M, M) = A B^T where gemm_causal reads it (row blocks
// of kCausalRows over causal_columns(r0, M, unit); the rest of C is not
// written), for A given as words (M rows of (K + 1) / 2, row stride lda)
// and B as M rows of K floats, rounded here; work: 2 M ((K + 1) / 2) words.
void bf16_causal_scores(int64_t M, int64_t K, int64_t unit, const uint32_t* a_words, int64_t lda,
                        const float* B, int64_t ldb, float* C, int64_t ldc, uint32_t* work);
// C (M, N) = A B for A (M, M) causal by steps of `unit` rows (gemm_causal:
// only its columns causal_columns(r0) of a row block are read), rounded to
// BF16 here, and B as row pairs ((M + 1) / 2 rows of N words, bf16_row_pairs);
// work: M ((M + 1) / 2) words.
void bf16_causal_product(int64_t M, int64_t N, int64_t unit, const float* A, int64_t lda,
                         const uint32_t* b_pairs, int64_t ldb, float* C, int64_t ldc,
                         uint32_t* work);

}  // namespace ssm::cpu
