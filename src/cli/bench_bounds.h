// What `ssm bench` measures a model's speed against, measured in the same
// run: the machine's streaming read rate (decode reads every weight once per
// token) and its OpenBLAS SGEMM rate on the model's in_proj shape (prefill
// is made of such products), and what the model costs per token in bytes and
// FLOPs. These are host bounds; a device backend would bring its own.
#pragma once

#include <cstdint>
#include <string>

#include "ssm/model/language_model.h"

namespace ssm::cli {

// The bytes the streaming read runs over: 256 MiB, or twice the last-level
// cache where that is larger (a 2026 Xeon's 260 MiB L3 held much of the
// 256 MiB, and of an int8 130m model: decode then ran above the "bound").
uint64_t read_buffer_bytes();

// GB/s of a streaming sum over `bytes` split over `threads`: best of passes.
double measure_read_gbs(int threads, uint64_t bytes);

// GFLOP/s of C[M, N] = A[M, K] B[N, K]^T through OpenBLAS, the rows of C
// split over `threads` (OpenBLAS single-threaded per call, as the engine
// calls it): best of passes.
double measure_sgemm_gflops(int threads, int64_t M, int64_t N, int64_t K);

// OpenBLAS's name for the kernels it runs here ("SkylakeX", "Haswell"...),
// and a sentence for the bench's header where they are older than the CPU
// (empty otherwise): Debian's OpenBLAS 0.3.21 does not know the newest
// CPUs and falls back (Prescott's SSE3 kernels on a 2026 Xeon, Haswell's on
// Zen 5), which makes its SGEMM rate a bound of those kernels only.
std::string blas_core();
std::string blas_core_note(const std::string& core);

struct ModelCosts {
  // Bytes a batch-1 decode step reads from weights: each once, of a tied
  // embedding only the rows the head multiplies by (Q8 scales included).
  double decode_bytes_per_token = 0;
  // Bytes of one sequence's recurrent state (every tensor of a batch-1
  // ModelState, in the dtypes it holds them in: the SSM states, BF16 with
  // --state-dtype bf16, and the convolutions' last inputs), which a
  // decode step reads once and writes once. An attention layer's cache
  // starts empty and is not counted.
  double state_bytes_per_sequence = 0;
  // FLOPs of the projections per prompt token (2 per weight of every 2-D
  // matrix but the embedding and head: prefill scores only the last token).
  double prefill_flops_per_token = 0;
  // The first in_proj weight's shape (out, in): the GEMM the bound is taken on.
  int64_t in_proj_out = 0, in_proj_in = 0;
};
ModelCosts model_costs(LanguageModel& model);

// Resets the process's peak resident set (Linux clear_refs); false where
// it cannot, and the peak then counts from the start of the process. Heap
// memory freed before (an earlier dtype's model, the bounds' buffers) is
// handed back to the system first (glibc's malloc_trim), so that it does not
// count in the next peak.
bool reset_peak_rss();
// Peak resident bytes since the last reset (or the start).
uint64_t peak_rss_bytes();

}  // namespace ssm::cli
