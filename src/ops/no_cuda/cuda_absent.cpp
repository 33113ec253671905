// Built instead of src/ops/cuda when SSM_CUDA is off: there is no cuda
// backend to list.
#include "ops/backend_registry.h"

namespace ssm {

const Backend* cuda_backend_if_built() { return nullptr; }
const Backend* cuda_backend_on_device(int) { return nullptr; }

}  // namespace ssm
