#include "ops/cpu/kernels.h"
#include "ops/cpu/mamba3_kernels.h"

namespace ssm::cpu {

void add_mamba3_kernels(OpTable& t) {
  t.mamba3_prepare = &mamba3_prepare;
  t.mamba3_prepare_backward = &mamba3_prepare_backward;
  t.mamba3_scan = &mamba3_scan;
  t.mamba3_prepare_scan = &mamba3_prepare_scan;
  t.mamba3_scan_backward = &mamba3_scan_backward;
  t.mamba3_output = &mamba3_output;
  t.mamba3_output_backward = &mamba3_output_backward;
}

}  // namespace ssm::cpu
