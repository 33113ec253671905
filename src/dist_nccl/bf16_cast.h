// Rounding a gradient bucket to BF16 for the all-reduce and widening it
// back, on a given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ssm::nccl {

void f32_to_bf16(const float* x, void* y, int64_t n, cudaStream_t stream);
void bf16_to_f32(const void* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace ssm::nccl
