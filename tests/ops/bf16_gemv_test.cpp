// The BF16 decoding kernel (x86_bf16_gemv.cpp) called directly: the
// activations rounded to nearest even as f32_to_bf16 rounds them, zeros past
// K; each activation row of a batch gets exactly the bits it gets alone, also
// past the 8 rows one pass over a weight row serves (linear() never sends
// more than 8, so only this test reaches the second pass); every output
// matches a double-precision sum of the same rounded activations and weights
// within F32 accumulation, with bias and accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/cpu/x86_kernels.h"
#include "ssm/tensor/convert.h"

namespace ssm::cpu {
namespace {

struct Bf16Case {
  int64_t M, K, N;
};

float widen(uint16_t v) {
  float f;
  bf16_to_f32(&v, &f, 1);
  return f;
}

// y (starting from y0) after the kernel over rows [m0, m0 + M) of x.
std::vector<float> run_bf16(const std::vector<float>& x, int64_t m0, int64_t M, int64_t K,
                            int64_t N, const std::vector<uint16_t>& W,
                            const std::vector<float>& bias, bool accumulate,
                            const std::vector<float>& y0, std::vector<uint16_t>* rounded = nullptr) {
  std::vector<uint16_t> work(static_cast<size_t>(bf16_gemv_workspace_bytes(M, K) / 2), 0xFFFF);
  const Bf16GemvRows xb = round_bf16_rows(x.data() + m0 * K, K, M, K, work.data());
  std::vector<float> y(y0.begin() + m0 * N, y0.begin() + (m0 + M) * N);
  bf16_gemv_avx512(xb, {.W = W.data(),
                        .K = K,
                        .n = N,
                        .bias = bias.data(),
                        .accumulate = accumulate,
                        .y = y.data(),
                        .ldy = N});
  if (rounded) *rounded = work;
  return y;
}

TEST(Bf16GemvAvx512, RoundsLikeF32ToBf16AndPadsWithZeros) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  for (const int64_t K : {1, 15, 16, 17, 31, 33, 64, 100}) {
    const int64_t M = 3;
    std::mt19937 rng(static_cast<uint32_t>(K));
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    std::vector<float> x(static_cast<size_t>(M * K));
    for (float& v : x) v = u(rng);
    x[0] = 1.f + 0x1p-8f;  // a tie: rounds to even (1.0)
    const int64_t width = bf16_gemv_width(K);
    std::vector<uint16_t> out(static_cast<size_t>(M * width), 0xFFFF);
    const Bf16GemvRows rows = round_bf16_rows(x.data(), K, M, K, out.data());
    EXPECT_EQ(rows.M, M);
    EXPECT_EQ(rows.width, width);
    std::vector<uint16_t> want(static_cast<size_t>(K));
    for (int64_t m = 0; m < M; ++m) {
      f32_to_bf16(x.data() + m * K, want.data(), K);
      for (int64_t k = 0; k < width; ++k)
        EXPECT_EQ(out[static_cast<size_t>(m * width + k)], k < K ? want[static_cast<size_t>(k)] : 0)
            << "K " << K << " row " << m << " element " << k;
    }
  }
}

TEST(Bf16GemvAvx512, BatchRowsEqualAloneAndMatchDoubleSums) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  // K: whole pairs of vectors, one vector more, tails shorter than a vector
  // (7, 33, 100), the model's 768 and 1536; M past one pass of 8 rows (11,
  // 17) and within it.
  for (const Bf16Case c : {Bf16Case{3, 768, 37}, Bf16Case{11, 200, 21}, Bf16Case{17, 33, 9},
                           Bf16Case{8, 1536, 5}, Bf16Case{8, 96, 70}, Bf16Case{5, 7, 13},
                           Bf16Case{2, 100, 64}})
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "M " << c.M << " K " << c.K << " N " << c.N
                                        << " accumulate " << accumulate);
      std::mt19937 rng(static_cast<uint32_t>(c.M * 1000 + c.K));
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      std::vector<float> x(static_cast<size_t>(c.M * c.K)), bias(c.N), y0(c.M * c.N);
      std::vector<float> wf(static_cast<size_t>(c.N * c.K));
      for (float& v : x) v = u(rng);
      for (float& v : wf) v = u(rng);
      for (float& v : bias) v = u(rng);
      for (float& v : y0) v = u(rng);
      std::vector<uint16_t> W(wf.size());
      f32_to_bf16(wf.data(), W.data(), static_cast<int64_t>(wf.size()));
      const std::vector<float> y = run_bf16(x, 0, c.M, c.K, c.N, W, bias, accumulate, y0);
      for (int64_t m = 0; m < c.M; ++m) {
        std::vector<uint16_t> xr;
        const std::vector<float> alone = run_bf16(x, m, 1, c.K, c.N, W, bias, accumulate, y0, &xr);
        for (int64_t j = 0; j < c.N; ++j) {
          const float got = y[static_cast<size_t>(m * c.N + j)];
          EXPECT_EQ(got, alone[static_cast<size_t>(j)]) << "row " << m << " output " << j;
          double sum = 0, magnitude = 0;
          for (int64_t k = 0; k < c.K; ++k) {
            const double p = double{widen(W[static_cast<size_t>(j * c.K + k)])} *
                             widen(xr[static_cast<size_t>(k)]);
            sum += p;
            magnitude += std::fabs(p);
          }
          const double start = accumulate ? y0[static_cast<size_t>(m * c.N + j)] : 0.0;
          const double want = start + sum + bias[j];
          // F32 sums of K exact products: a few roundings of their magnitude.
          EXPECT_NEAR(got, want, 1e-5 * (magnitude + std::fabs(bias[j]) + std::fabs(start)) + 1e-6)
              << "row " << m << " output " << j;
        }
      }
    }
}

}  // namespace
}  // namespace ssm::cpu
