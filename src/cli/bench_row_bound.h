// Which bound a `ssm bench` row is a fraction of, from the bounds measured
// in its run (the host's or a device's) and what the model costs per token.
#pragma once

#include "cli/bench_bounds.h"
#include "cli/bench_report.h"

namespace ssm::cli {

enum class BenchTest { kPrefill, kDecode };

// Sets row.bound and row.bound_kind (for a decode row also the bytes read
// per step and the bound with the recurrent state) for a row of row.batch
// sequences.
// - Host bounds: prefill at the SGEMM rate ("sgemm"), decode at the
//   streaming read rate ("read"), the state's bytes counted once; the read
//   rate is the higher of those measured around the row when the row has
//   them (row.read_gbs_before/after), else the run's.
// - Device bounds (b.device set): prefill at the linear op's bf16
//   tensor-core rate ("bf16-linear"), decode at the copy rate ("copy"),
//   which counts read and written bytes: the weights are read once, the
//   state read once and written once, so its bytes count twice.
void set_row_bound(BenchRow& row, BenchTest test, const BenchBounds& b, const ModelCosts& costs);

}  // namespace ssm::cli
