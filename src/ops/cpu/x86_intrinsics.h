// What every hand-written x86 kernel file (x86_*.cpp) starts with: the
// AVX-512 intrinsics and the target attributes that switch the instruction
// sets on per function. The files are compiled for the baseline CPU; which
// kernels run is chosen at run time (cpu_has_*, x86_kernels.h).
#pragma once

#if defined(__x86_64__)
// GCC 12's _mm512_undefined_* (inside _mm512_cvtepi32_ps,
// _mm512_reduce_add_ps ...) initialise a variable from itself, which
// -Wuninitialized reports wherever they are inlined. Clang neither reports
// it nor knows -Wmaybe-uninitialized (and -Werror rejects unknown names).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

#define SSM_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define SSM_TARGET_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define SSM_TARGET_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))
