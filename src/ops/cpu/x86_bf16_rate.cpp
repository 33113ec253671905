// Whether vdpbf16ps beats the F32 multiply-add here. On AMD Zen 4/5 it does
// the work of two F32 FMAs in one FMA slot (BF16 products twice F32's rate);
// on the Intel Xeon of 2026-12-07 (family 6 model 207, "Emerald Rapids")
// it issued at a quarter of the FMA's rate, half the F32 FLOPs (103 against
// 210 GFLOP/s on one core), and BF16 prefill ran at 0.65x F32. The
// answer is measured once, not read from a table of CPU models: a few
// hundred microseconds of each instruction in independent chains.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
namespace {

constexpr int kChains = 12;  // independent accumulators: latency hidden
constexpr long kRounds = 20000;

using Clock = std::chrono::steady_clock;

// FLOPs per second of kChains chains of `step` over kRounds rounds.
template <typename Run>
double flops_per_s(Run run, double flops_per_instruction) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, kChains * kRounds * flops_per_instruction / s);
  }
  return best;
}

SSM_TARGET_AVX512 float fma_chains() {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 x = _mm512_set1_ps(1.0001f);
  const __m512 y = _mm512_set1_ps(0.9999f);
  for (long r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
    asm volatile("" : "+v"(x));  // keeps the loop from being folded
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

SSM_TARGET_BF16 float dot_chains() {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512i x = _mm512_set1_epi32(0x3f803f80);  // pairs of BF16 ones
  const __m512i y = _mm512_set1_epi32(0x3f803f80);
  for (long r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kChains; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], reinterpret_cast<__m512bh&>(x), reinterpret_cast<const __m512bh&>(y));
    asm volatile("" : "+v"(x));
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// Where the compiler must assume the sums are read: keeps them live.
volatile float sink;

bool measured_faster() {
  const double fma = flops_per_s([] { sink = fma_chains(); }, 2.0 * 16);
  const double dot = flops_per_s([] { sink = dot_chains(); }, 4.0 * 16);
  // Faster by a margin: where the two are about even, the F32 path keeps
  // the activations unrounded.
  return dot > 1.25 * fma;
}

}  // namespace

bool cpu_bf16_dot_products_fast() {
  static const bool fast = [] {
    if (!cpu_has_avx512_bf16()) return false;
    // SSM_CPU_BF16_DOT=0|1: the choice forced (tests run both paths).
    if (const char* v = std::getenv("SSM_CPU_BF16_DOT")) {
      if (std::string_view(v) == "0") return false;
      if (std::string_view(v) == "1") return true;
    }
    return measured_faster();
  }();
  return fast;
}
#else
bool cpu_bf16_dot_products_fast() { return false; }
#endif

}  // namespace ssm::cpu
