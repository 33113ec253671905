// mamba3_prepare_scan on the cpu: the prepare and the chunked scan per
// (batch row, head) and chunk. The separate ops write q, k and v of every
// head and step, R (2N + P) floats a step and head (31 MB for a 256-step
// segment of the 130m MIMO R = 4 shapes), and the scan reads them back from
// memory; here a chunk's q, k and v (80 KB there: 16 steps) are prepared
// into the part's buffers and scanned while they are in cache. Each step's
// arithmetic is the separate ops' (mamba3_prepare_steps.h,
// mamba3_scan_chunks.h), so every output is theirs to the bit.
#include <algorithm>

#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_prepare_steps.h"
#include "ops/cpu/mamba3_scan_chunks.h"
#include "ops/cpu/mamba3_workspace.h"

namespace ssm::cpu {

using namespace m3;

namespace {

// The scan's buffers and one chunk's q, k and v.
struct FusedWorkspace {
  ScanWorkspace scan;
  int64_t R;
  float *q, *k, *v;
  void carve(Carver<float>& f, Carver<double>& d) {
    scan.carve(f, d);
    q = f.take(scan.Q * R * scan.N);
    k = f.take(scan.Q * R * scan.N);
    v = f.take(scan.Q * R * scan.P);
  }
};

}  // namespace

void mamba3_prepare_scan(Context& ctx, const ops::Mamba3PrepareScanArgs& args) {
  const ops::Mamba3PrepareArgs& p = args.prepare;
  const PrepareHeads heads(p);
  const PrepareDims& d = heads.dims();
  if (d.L == 0) return;
  if (d.L == 1) {
    // A decode step: the sequential recurrence, which has no chunks. Each
    // head's q, k and v are prepared and stepped in one loop on the pool
    // (one hand-off a layer fewer than the two ops, and q, k, v read back
    // from L1), with the separate ops' arithmetic: the same values.
    prepare_rows(ctx, p, d);
    const ScanView a(ctx, args.scan);  // its q, k, v are the prepare's (checked)
    float *q = out(p.q), *k = out(p.k), *v = out(p.v);
    ctx.pool().parallel_for_dynamic(d.B * d.H, [&](int64_t i0, int64_t i1) {
      const int64_t R = d.R, N = d.N, P = d.P;
      for (int64_t i = i0; i < i1; ++i) {
        heads.scalars(i);
        heads.vectors(i, 0, q + i * R * N, k + i * R * N, v + i * R * P);
        // The next head's own parameters, fetched while this head steps.
        if (i + 1 < i1) heads.prefetch_params(i + 1);
        step_head(a, i);
      }
    });
    return;
  }
  prepare_rows(ctx, p, d);
  const ScanView a(ctx, args.scan);
  SSM_CHECK(!a.ssm16, "a BF16 state reaches the chunked scan widened (ops::mamba3_prepare_scan)");
  const int64_t L = d.L, R = d.R, N = d.N, P = d.P;
  const int64_t Q = scan_chunk_steps(a, args.scan.chunk);
  const Parts parts = split(ctx, d.B * d.H);
  const Slots<FusedWorkspace> slots(
      ctx, parts,
      {.scan = {.Q = Q, .M = Q * R, .P = P, .N = N, .L = L, .bf16 = a.bf16_products}, .R = R});
  for_each_part(ctx, parts, [&](int64_t part, int64_t i0, int64_t i1) {
    const FusedWorkspace ws = slots[part];
    for (int64_t i = i0; i < i1; ++i) {
      // All steps' scalars first: a chunk's weights read the next step's.
      heads.scalars(i);
      scan_head_begin(a, i, ws.scan);
      int64_t last = 0;  // the last chunk's step count
      for (int64_t t0 = 0; t0 < L; t0 += Q) {
        last = std::min(Q, L - t0);
        for (int64_t t = 0; t < last; ++t)
          heads.vectors(i, t0 + t, ws.q + t * R * N, ws.k + t * R * N, ws.v + t * R * P);
        scan_chunk(a, i, t0, ws.q, ws.k, ws.v, ws.scan);
      }
      scan_head_end(a, i, ws.k + (last - 1) * R * N, ws.v + (last - 1) * R * P, ws.scan);
    }
  });
}

}  // namespace ssm::cpu
