// The Mamba-2 ops of the cpu backend: a sequence takes the chunked SSD form,
// a single time step (decoding) the step kernel, which allocates nothing
// once the arena has grown to its state; the fused decode step between the
// projections (ops::ssd_step) runs the convolution inside the step's loop.
#include "ops/cpu/ssd.h"

#include "ops/cpu/kernels.h"

namespace ssm::cpu {
namespace {

void ssd_scan(Context& ctx, const ops::SsdScanArgs& a) {
  if (a.x.dim(1) == 1)
    ssd_step(ctx, a);
  else
    ssd_scan_chunked(ctx, a);
}

}  // namespace

void add_ssd_kernels(OpTable& t) {
  t.ssd_prepare = &ssd_prepare;
  t.ssd_prepare_backward = &ssd_prepare_backward;
  t.ssd_scan = &ssd_scan;
  t.ssd_scan_backward = &ssd_scan_backward;
  t.ssd_step = &ssd_decode_step;
  t.bf16_state_steps = true;  // ssd_step.cpp and mamba3_scan.cpp's step_head
}

}  // namespace ssm::cpu
