// The launcher of ops::dropout (dropout.cu), in plain types like launch.h.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// t[r, c] = keep(key, r * cols + c) ? t[r, c] * scale : 0, in place
// (ops/dropout_mask.h).
void launch_dropout(Rows t, uint64_t key, uint32_t threshold, float scale, cudaStream_t s);

}  // namespace ssm::cuda
