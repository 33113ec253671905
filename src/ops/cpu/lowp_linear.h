// Matrix products with 16- and 8-bit weights (F16, BF16, Q8 with per-row
// scales) and F32 activations, accumulated in F32. Compiled for every x86
// target Highway knows (SSE4, AVX2, AVX-512 ...) and picked at run time for
// the CPU the program runs on.
#pragma once

#include <cstdint>

#include "ssm/tensor/dtype.h"

namespace ssm::cpu {

// n rows of a (rows, K) weight matrix in a 16- or 8-bit dtype (or F32: the
// matrix-vector kernel serves F32 decoding too).
struct LowpWeights {
  DType dtype = DType::kBF16;     // kF16, kBF16 or kQ8; lowp_gemv also kF32
  const void* data = nullptr;     // row 0 of the rows addressed
  int64_t K = 0;                  // elements per row, also the row stride
  const float* scales = nullptr;  // kQ8: scale of row j at scales[j * scale_stride]
  int64_t scale_stride = 1;
};

// y[m][j] = sum_k x[m][k] W[j][k] (+ bias[j]) (+ y[m][j] when accumulating)
// for m < M, j < n. Each weight row is read from memory once for all M rows
// of x (it stays in L1 while they pass over it).
struct LowpGemvJob {
  LowpWeights W;
  int64_t n = 0;
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t M = 0;
  const float* bias = nullptr;  // n entries, or null
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
};
void lowp_gemv(const LowpGemvJob& job);

// out[j][k] = the F32 value of W[j][k] (scale included), j < n: the packing
// step of the prefill path, which then runs sgemm on F32 blocks.
void lowp_widen_rows(const LowpWeights& W, int64_t n, float* out);

// The Highway target chosen on this CPU ("AVX3_ZEN4", "AVX2", ...).
const char* lowp_target_name();

}  // namespace ssm::cpu
