#include "cli/bench_row_bound.h"

#include <algorithm>

namespace ssm::cli {

void set_row_bound(BenchRow& row, BenchTest test, const BenchBounds& b, const ModelCosts& costs) {
  const bool device = !b.device.empty();
  const double batch = static_cast<double>(row.batch);
  if (test == BenchTest::kPrefill) {
    const double flops = device ? b.linear_flops : b.sgemm_gflops * 1e9;
    row.bound = flops / costs.prefill_flops_per_token;
    row.bound_kind = device ? "bf16-linear" : "sgemm";
    return;
  }
  const double row_read = std::max(row.read_gbs_before, row.read_gbs_after);
  const double bytes_per_s = device ? b.copy_bytes_per_s : (row_read > 0 ? row_read : b.read_gbs) * 1e9;
  row.bound = batch * bytes_per_s / costs.decode_bytes_per_token;
  row.bound_kind = device ? "copy" : "read";
  row.weight_bytes = costs.decode_bytes_per_token;
  // The step must also read the state (and write it back).
  row.state_bytes = batch * costs.state_bytes_per_sequence;
  const double state_traffic = device ? 2 * row.state_bytes : row.state_bytes;
  row.bound_with_state = batch * bytes_per_s / (costs.decode_bytes_per_token + state_traffic);
}

}  // namespace ssm::cli
