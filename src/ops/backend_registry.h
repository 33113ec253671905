// The built-in backends (each defined in its own folder).
#pragma once

#include "ssm/ops/backend.h"

namespace ssm {

const Backend& ref_backend();
const Backend& cpu_backend();
// The cuda backend when the build has it (SSM_CUDA), else null.
const Backend* cuda_backend_if_built();

}  // namespace ssm
