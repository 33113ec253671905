// Bulk conversions between the stored floating formats and F32.
#pragma once

#include <cstdint>

namespace ssm {

// Inputs need no alignment (they may point into an mmap'd file).
void f16_to_f32(const void* in, float* out, int64_t n);
void bf16_to_f32(const void* in, float* out, int64_t n);
void f32_to_f16(const float* in, void* out, int64_t n);
void f32_to_bf16(const float* in, void* out, int64_t n);

}  // namespace ssm
