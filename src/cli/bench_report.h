// The results of `ssm bench`: one row per (dtype, threads, batch, test),
// each with the bound measured in the same run and its fraction of it;
// printed as a Markdown table or one JSON document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench_run.h"
#include "cli/json_out.h"

namespace ssm::cli {

struct BenchBounds {
  int threads = 0;
  // The host's (device empty): a streaming read and OpenBLAS on the
  // in_proj shape.
  double read_gbs = 0;
  double sgemm_gflops = 0;
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  std::string blas_core;  // OpenBLAS's kernels (bench_bounds.h)
  // A device backend's ("cuda:0"), measured there (device_bounds.h): its
  // linear op's bf16 tensor-core rate on an n^3 product, and its memory's
  // copy rate, read and written bytes both counted.
  std::string device;
  double linear_flops = 0;
  int64_t linear_n = 0;
  double copy_bytes_per_s = 0;
};

struct BenchRow {
  std::string dtype;
  // "bf16" with --state-dtype bf16 (shown after the dtype, and in the JSON);
  // empty for the default F32 state.
  std::string state_dtype;
  int threads = 0;
  int64_t batch = 0;
  std::string test;  // "pp512" (prefill of 512 tokens), "tg128" (128 decode steps)
  MeanDeviation tokens_per_s;
  int repetitions = 0;      // how many were timed (fewer when interrupted)
  double bound = 0;         // tokens/s at the bound
  std::string bound_kind;   // "sgemm" or "read"; on a device "bf16-linear" or "copy"
  double weight_bytes = 0;  // read per decode step (decode rows)
  // Decode rows: the recurrent state's bytes per step (batch x one
  // sequence's), and the read bound over weights plus those bytes read once.
  double state_bytes = 0;
  double bound_with_state = 0;
  // Host decode rows: the streaming read (GB/s, as BenchBounds::read_gbs)
  // measured just before and just after the row's runs, so that the row and
  // its bound see the same machine (a shared host's memory rate drifts by 2x
  // within a run); the row's bounds take the higher of the two. 0: not
  // measured (prefill rows, a device's rows), the run's read_gbs is used.
  double read_gbs_before = 0, read_gbs_after = 0;
  // Peak memory of this dtype's model and runs: the process's resident set
  // on the host, the device's tensors on a device (and then its capacity).
  uint64_t peak_bytes = 0;
  uint64_t capacity = 0;
};

struct BenchReport {
  std::string model, backend, simd_target;
  std::string architecture;  // "mamba3, 24 layers, d_model 768"
  int64_t parameters = 0;
  std::vector<BenchBounds> bounds;
  std::vector<BenchRow> rows;
};

void print_bench_markdown(const BenchReport& r);
OrderedJson bench_json(const BenchReport& r);

}  // namespace ssm::cli
