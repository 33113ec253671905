// The built-in backends (each defined in its own folder).
#pragma once

#include "ssm/ops/backend.h"

namespace ssm {

const Backend& ref_backend();
const Backend& cpu_backend();

}  // namespace ssm
