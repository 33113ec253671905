// The int8 matrix-vector kernel (x86_q8_gemv.cpp) called directly: each
// activation row of a batch gets exactly the bits it gets alone, also past
// the 8 rows one pass over a weight row serves (linear() never sends more
// than 8, so only this test reaches the second pass), and every output
// matches a double-precision sum of the same quantised values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {
namespace {

struct Q8Case {
  int64_t M, K, N;
};

// y = the kernel's output for rows [m0, m0 + M) of x.
std::vector<float> run_q8(const std::vector<float>& x, int64_t m0, int64_t M, int64_t K, int64_t N,
                          const std::vector<int8_t>& W, const std::vector<float>& wscale,
                          const std::vector<float>& bias) {
  std::vector<uint8_t> work(static_cast<size_t>(q8_workspace_bytes(M, K)) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(work.data()) + 63) & ~uintptr_t{63});
  const Q8Activations xq = quantize_q8_rows(x.data() + m0 * K, K, M, K, aligned);
  std::vector<float> y(static_cast<size_t>(M * N), -1.f);
  q8_gemv_vnni(xq, {.W = W.data(),
                    .K = K,
                    .wscale = wscale.data(),
                    .wscale_stride = 1,
                    .n = N,
                    .bias = bias.data(),
                    .accumulate = false,
                    .y = y.data(),
                    .ldy = N});
  return y;
}

TEST(Q8GemvVnni, BatchRowsEqualAloneAndMatchDoubleSums) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  // K: whole blocks, a partial block, a tail shorter than a vector; M past
  // one pass of 8 rows (11, 17) and within it.
  for (const Q8Case c :
       {Q8Case{3, 768, 37}, Q8Case{11, 200, 21}, Q8Case{17, 33, 9}, Q8Case{8, 1536, 5}}) {
    SCOPED_TRACE(::testing::Message() << "M " << c.M << " K " << c.K << " N " << c.N);
    std::mt19937 rng(static_cast<uint32_t>(c.M * 1000 + c.K));
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::uniform_int_distribution<int> w8(-127, 127);
    std::vector<float> x(static_cast<size_t>(c.M * c.K)), wscale(c.N), bias(c.N);
    std::vector<int8_t> W(static_cast<size_t>(c.N * c.K));
    for (float& v : x) v = u(rng);
    for (int8_t& v : W) v = static_cast<int8_t>(w8(rng));
    for (float& v : wscale) v = 0.01f + 0.001f * u(rng);
    for (float& v : bias) v = u(rng);
    const std::vector<float> y = run_q8(x, 0, c.M, c.K, c.N, W, wscale, bias);
    for (int64_t m = 0; m < c.M; ++m) {
      const std::vector<float> alone = run_q8(x, m, 1, c.K, c.N, W, wscale, bias);
      // The quantised row, to sum in double.
      std::vector<uint8_t> work(static_cast<size_t>(q8_workspace_bytes(1, c.K)) + 64);
      void* aligned =
          reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(work.data()) + 63) & ~uintptr_t{63});
      const Q8Activations q = quantize_q8_rows(x.data() + m * c.K, c.K, 1, c.K, aligned);
      for (int64_t j = 0; j < c.N; ++j) {
        const float got = y[static_cast<size_t>(m * c.N + j)];
        EXPECT_EQ(got, alone[static_cast<size_t>(j)]) << "row " << m << " output " << j;
        double sum = 0, magnitude = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const int w = W[static_cast<size_t>(j * c.K + k)];
          const double s = static_cast<double>(q.scales[k / kQ8ActBlock]) * q.q[k];
          sum += s * w;
          // The kernel sums s * (w + 128), then takes away 128 * sum(s).
          magnitude += std::fabs(s) * (std::abs(w) + 128);
        }
        const double want = wscale[j] * sum + bias[j];
        // F32 block scaling and sums: a few roundings of that magnitude.
        EXPECT_NEAR(got, want, 1e-5 * (wscale[j] * magnitude + std::fabs(bias[j])) + 1e-6)
            << "row " << m << " output " << j;
      }
    }
  }
}

}  // namespace
}  // namespace ssm::cpu
