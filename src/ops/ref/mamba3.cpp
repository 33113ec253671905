// The reference Mamba-3 kernels in the op table: the float instances of the
// templates in mamba3_ref.h.
#include "ops/ref/kernels.h"
#include "ops/ref/mamba3_ref.h"

namespace ssm::ref {

void add_mamba3_kernels(OpTable& t) {
  t.mamba3_prepare = [](Context&, const ops::Mamba3PrepareArgs& a) { mamba3_prepare<float>(a); };
  t.mamba3_prepare_backward = [](Context&, const ops::Mamba3PrepareBackwardArgs& a) {
    mamba3_prepare_backward<float>(a);
  };
  t.mamba3_scan = [](Context&, const ops::Mamba3ScanArgs& a) { mamba3_scan<float>(a); };
  t.mamba3_scan_backward = [](Context&, const ops::Mamba3ScanBackwardArgs& a) {
    mamba3_scan_backward<float>(a);
  };
  t.mamba3_output = [](Context&, const ops::Mamba3OutputArgs& a) { mamba3_output<float>(a); };
  t.mamba3_output_backward = [](Context&, const ops::Mamba3OutputBackwardArgs& a) {
    mamba3_output_backward<float>(a);
  };
}

}  // namespace ssm::ref
