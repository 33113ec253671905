// The built-in backends (each defined in its own folder).
#pragma once

#include "ssm/ops/backend.h"

namespace ssm {

const Backend& ref_backend();
const Backend& cpu_backend();
// The cuda backend when the build has it (SSM_CUDA), else null.
const Backend* cuda_backend_if_built();
// The cuda backend computing on GPU `index` (cuda_backend_if_built() is
// index 0), else null. Whether that GPU exists is checked by its contexts.
const Backend* cuda_backend_on_device(int index);

}  // namespace ssm
