// A backend bound to one of its devices. `--backend cuda` computes on GPU 0;
// a program that keeps a model on each of several GPUs (ssm serve's
// replicas) makes a Context of each GPU's backend. Kept apart from
// backend.h so that the few users of device indices include it alone.
#pragma once

#include <string_view>

#include "ssm/ops/backend.h"

namespace ssm {

// The backend `name` computing on device `device_index` (cuda: the GPU's
// ordinal; its contexts say when that GPU does not exist). Host backends
// have only device 0: ssm::Error for any other index, as for a negative one
// or an unknown name.
const Backend& find_backend_on(std::string_view name, int device_index);

}  // namespace ssm
