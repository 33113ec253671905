#include "cli/bench_report.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "cli/bench_bounds.h"
#include "ssm/core/error.h"
#include "ssm/model/memory_budget.h"

namespace ssm::cli {
namespace {

// Bounds (and so rows) of a device backend: measured on its device.
bool on_device(const BenchReport& r) { return !r.bounds.empty() && !r.bounds.front().device.empty(); }

std::string peak_cell(const BenchRow& row) {
  if (row.capacity == 0) return format_bytes(row.peak_bytes);
  return cat(format_bytes(row.peak_bytes), " of ", format_bytes(row.capacity));
}

// "45.2 / 47.1": the reads measured before and after a decode row.
std::string read_pair(const BenchRow& row) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f / %.1f", row.read_gbs_before, row.read_gbs_after);
  return buf;
}

}  // namespace

void print_bench_markdown(const BenchReport& r) {
  std::printf("ssm bench %s: %s, %lld parameters; backend %s, SIMD %s\n\n", r.model.c_str(),
              r.architecture.c_str(), static_cast<long long>(r.parameters), r.backend.c_str(),
              r.simd_target.c_str());
  const bool device = on_device(r);
  for (const BenchBounds& b : r.bounds) {
    if (!b.device.empty())
      std::printf("bounds on %s, %d threads: bf16-linear %.1f TFLOP/s (the backend's linear op, "
                  "%lld^3 on bf16 tensor cores); copy %.1f GB/s (a device-to-device copy, bytes read "
                  "and written)\n",
                  b.device.c_str(), b.threads, b.linear_flops / 1e12, static_cast<long long>(b.linear_n),
                  b.copy_bytes_per_s / 1e9);
    else
      std::printf("bounds, %d threads: streaming read %.1f GB/s (at the start; decode rows: their "
                  "own, below); OpenBLAS SGEMM %.1f GFLOP/s on %lld x %lld x %lld (in_proj; its %s "
                  "kernels)\n",
                  b.threads, b.read_gbs, b.sgemm_gflops, static_cast<long long>(b.gemm_m),
                  static_cast<long long>(b.gemm_n), static_cast<long long>(b.gemm_k),
                  b.blas_core.empty() ? "unnamed" : b.blas_core.c_str());
    if (const std::string note = blas_core_note(b.blas_core); b.device.empty() && !note.empty())
      std::printf("note: %s\n", note.c_str());
  }
  // The host's decode rows carry the reads measured around them.
  const char* read_column = device ? "" : " read before / after (GB/s) |";
  std::printf("\n| dtype | threads | batch | test | tokens/s | bound | of bound | of %s |%s "
              "%s |\n|---|---:|---:|---|---:|---:|---:|---:|%s---:|\n",
              device ? "copy+state" : "read+state", read_column,
              device ? "peak device memory" : "peak RSS", device ? "" : "---:|");
  for (const BenchRow& row : r.rows) {
    const std::string with_state =
        row.bound_with_state > 0
            ? cat(std::lround(100.0 * row.tokens_per_s.mean / row.bound_with_state), "%")
            : std::string("-");
    const std::string reads = device                  ? std::string()
                              : row.read_gbs_before > 0 ? cat(" ", read_pair(row), " |")
                                                        : std::string(" - |");
    const std::string dtype =
        row.state_dtype.empty() ? row.dtype : cat(row.dtype, ", state ", row.state_dtype);
    std::printf("| %s | %d | %lld | %s | %.1f ± %.1f | %.1f (%s) | %.0f%% | %s |%s %s |\n",
                dtype.c_str(), row.threads, static_cast<long long>(row.batch),
                row.test.c_str(), row.tokens_per_s.mean, row.tokens_per_s.deviation, row.bound,
                row.bound_kind.c_str(),
                row.bound > 0 ? 100.0 * row.tokens_per_s.mean / row.bound : 0.0,
                with_state.c_str(), reads.c_str(), peak_cell(row).c_str());
  }
  if (device)
    std::printf("\nbound: pp (prefill) the projection FLOPs per token at the bf16-linear rate; tg "
                "(decode) the weight bytes read per step at the copy rate, times the batch. "
                "copy+state: decode against the same rate over the weight bytes plus the recurrent "
                "state's bytes read and written (twice per step and sequence).\n");
  else
    std::printf("\nbound: pp (prefill) the projection FLOPs per token at the SGEMM rate; tg (decode) "
                "the weight bytes read per step at the streaming read rate, times the batch, the rate "
                "the higher of the two reads measured just before and just after the row. "
                "read+state: decode against the same rate over the weight bytes plus the recurrent "
                "state's bytes (read once per step and sequence).\n");
  std::fflush(stdout);
}

OrderedJson bench_json(const BenchReport& r) {
  OrderedJson bounds = OrderedJson::array(), rows = OrderedJson::array();
  const bool device = on_device(r);
  for (const BenchBounds& b : r.bounds) {
    if (!b.device.empty())
      bounds.push_back({{"threads", b.threads}, {"device", b.device},
                        {"bf16_linear_flops", b.linear_flops}, {"bf16_linear_n", b.linear_n},
                        {"copy_bytes_per_s", b.copy_bytes_per_s}});
    else
      bounds.push_back({{"threads", b.threads}, {"read_gbs", b.read_gbs},
                        {"sgemm_gflops", b.sgemm_gflops}, {"blas_core", b.blas_core},
                        {"sgemm_shape", {b.gemm_m, b.gemm_n, b.gemm_k}}});
  }
  for (const BenchRow& row : r.rows) {
    OrderedJson j = {{"dtype", row.dtype}, {"threads", row.threads}, {"batch", row.batch},
                    {"test", row.test}, {"tokens_per_s", row.tokens_per_s.mean},
                    {"deviation", row.tokens_per_s.deviation}, {"repetitions", row.repetitions},
                    {"bound_tokens_per_s", row.bound}, {"bound", row.bound_kind},
                    {"fraction_of_bound", row.bound > 0 ? row.tokens_per_s.mean / row.bound : 0.0},
                    {"weight_bytes_per_step", row.weight_bytes},
                    {"state_bytes_per_step", row.state_bytes},
                    {"bound_with_state_tokens_per_s", row.bound_with_state},
                    {"fraction_of_bound_with_state",
                     row.bound_with_state > 0 ? row.tokens_per_s.mean / row.bound_with_state : 0.0}};
    if (!row.state_dtype.empty()) j["state_dtype"] = row.state_dtype;
    if (device) {
      j["peak_device_bytes"] = row.peak_bytes;
      j["device_capacity_bytes"] = row.capacity;
    } else {
      j["read_gbs_before"] = row.read_gbs_before;
      j["read_gbs_after"] = row.read_gbs_after;
      j["peak_rss_bytes"] = row.peak_bytes;
    }
    rows.push_back(std::move(j));
  }
  return {{"model", r.model}, {"architecture", r.architecture}, {"parameters", r.parameters},
          {"backend", r.backend}, {"simd", r.simd_target}, {"bounds", bounds}, {"results", rows}};
}

}  // namespace ssm::cli
