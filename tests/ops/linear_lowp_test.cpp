// linear with F16, BF16 and Q8 weights on every backend against ref given the
// same stored weights: ref reads each stored value exactly and sums in
// double. F16 paths widen the weights and differ only by their F32
// accumulation (the F32 tolerance). The BF16 and Q8 paths may also round
// the activations (BF16 dot products round x to BF16; the VNNI path
// quantises x to int8 per block of kQ8ActBlock values), so their error is
// held to the bound of that rounding, computed per output from the inputs:
// each path is either exact or within it, on every path (matrix-vector for
// M <= 8 with row groups of 4, products over all rows above), with row tails
// shorter than a vector, bias, accumulation and strided rows. Also embedding
// lookups from such a table (a tied head converted at load).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "ops/against_ref.h"
#include "ops/cpu/x86_kernels.h"
#include "ssm/core/error.h"
#include "ssm/ops/embedding.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

using testing::on;
using testing::on_rows;
using testing::random_tensor;

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
  return std::get<0>(info.param) + "_" + std::string(dtype_name(std::get<1>(info.param)));
}

class LinearLowpTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

// The most that rounding the activations may change y[m][j] (host, double):
// BF16 rounding moves each x by at most 2^-9 of itself; Q8 quantisation by at
// most half its block's step, max |x in block| / 254. F16 keeps x exact.
std::vector<double> activation_rounding_bound(DType dtype, const Tensor& x, const Tensor& W) {
  const int64_t M = x.dim(0), K = x.dim(1), N = W.dim(0);
  const Tensor w = W.to_f32();
  std::vector<double> bound(static_cast<size_t>(M * N), 0.0);
  if (dtype == DType::kF16) return bound;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x.data<float>() + m * K;
    std::vector<double> dx(static_cast<size_t>(K));
    for (int64_t b0 = 0; b0 < K; b0 += cpu::kQ8ActBlock) {
      const int64_t b1 = std::min(K, b0 + cpu::kQ8ActBlock);
      double amax = 0;
      for (int64_t k = b0; k < b1; ++k) amax = std::max(amax, std::fabs(double{xr[k]}));
      for (int64_t k = b0; k < b1; ++k)
        dx[k] = dtype == DType::kBF16 ? std::ldexp(std::fabs(double{xr[k]}), -9) : amax / 254.0;
    }
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(double{w.data<float>()[j * K + k]}) * dx[k];
      bound[m * N + j] = s;
    }
  }
  return bound;
}

// Runs `run` (which returns y's rows on the host: `left` columns, then the N
// columns of y, then any others) on ref and on `backend` with 1, 2 and 3
// threads: each output within the rounding bound of x for W's dtype of
// ref's, the columns around y's as they were, the same bits for every
// thread count.
void expect_within_rounding(const std::string& backend, DType dtype, const Tensor& x,
                            const Tensor& W, int64_t left,
                            const std::function<Tensor(Context&)>& run) {
  const int64_t M = x.dim(0), N = W.dim(0);
  Context ref_ctx("ref", 1);
  const Tensor want = run(ref_ctx);
  const std::vector<double> bound = activation_rounding_bound(dtype, x, W);
  const int64_t width = want.cols();
  Tensor first;
  for (int threads : {1, 2, 3}) {
    Context ctx(backend, threads);
    const Tensor got = run(ctx);
    int64_t bad = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < width; ++c) {
        const double g = got.data<float>()[m * width + c], w = want.data<float>()[m * width + c];
        const int64_t j = c - left;
        const double allowed =
            j < 0 || j >= N ? 0.0 : bound[m * N + j] + 1e-5 * std::fabs(w) + 1e-5;
        if (!(std::fabs(g - w) <= allowed) && bad++ < 5)
          ADD_FAILURE() << "y[" << m << "][" << j << "] = " << g << ", ref " << w
                        << ", allowed error " << allowed << ", " << threads << " threads";
      }
    if (first.defined())
      EXPECT_TRUE(testing::bitwise_equal(got, first)) << threads << " threads differ from 1";
    else
      first = got;
  }
}

TEST_P(LinearLowpTest, MatchesRefOnTheSameStoredWeights) {
  const auto& [backend, dtype] = GetParam();
  // K 7 and 33: tails shorter than any vector; K 200: a partial block of
  // Q8 activations; M 1..8 the matrix-vector path (5: a full row group and
  // one of 1); M 9, 100 and 130 the products over all rows, with partial
  // blocks of rows (N 200, 300: partial blocks of weight rows).
  for (const auto& [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 13},
                                {2, 64, 65},
                                {5, 33, 200},
                                {8, 256, 130},
                                {3, 200, 37},
                                {9, 17, 200},
                                {100, 64, 300},
                                {130, 131, 50}})
    for (bool bias : {false, true})
      for (bool accumulate : {false, true})
        for (bool strided : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "M " << M << " K " << K << " N " << N << " bias " << bias
                       << " accumulate " << accumulate << " strided " << strided);
          const uint64_t seed = M * 1000 + N + bias * 7 + accumulate * 3;
          const Tensor x = random_tensor({M, K}, seed);
          const Tensor W = random_tensor({N, K}, seed + 1).to_dtype(dtype);
          const Tensor b = random_tensor({N}, seed + 2), y0 = random_tensor({M, N}, seed + 3);
          constexpr int64_t kLeft = 5, kRight = 2;
          auto run = [&](Context& ctx) {
            const auto y = testing::in_block(ctx, y0, strided, kLeft, kRight);
            ops::linear(ctx, {.x = on_rows(ctx, x, strided, 3, 4),
                              .W = on(ctx, W),
                              .bias = bias ? on(ctx, b) : Tensor(),
                              .y = y.view,
                              .accumulate = accumulate});
            return testing::host(y.rows);
          };
          expect_within_rounding(backend, dtype, x, W, strided ? kLeft : 0, run);
        }
}

// A row block of a converted matrix (the head's rows(0, V)) reads its own
// rows and scales.
TEST_P(LinearLowpTest, RowBlockOfConvertedWeights) {
  const auto& [backend, dtype] = GetParam();
  const Tensor x = random_tensor({3, 40}, 5);
  const Tensor W = random_tensor({96, 40}, 6).to_dtype(dtype);
  for (int64_t M : {3, 20}) {
    const Tensor xm = M == 3 ? x : random_tensor({M, 40}, 7);
    expect_within_rounding(backend, dtype, xm, W.rows(30, 80), 0, [&](Context& ctx) {
      const Tensor y = on(ctx, Tensor::zeros(DType::kF32, {M, 50}));
      ops::linear(ctx, {.x = on(ctx, xm), .W = on(ctx, W).rows(30, 80), .y = y});
      return testing::host(y);
    });
  }
}

TEST_P(LinearLowpTest, EmbeddingFromConvertedTable) {
  const auto& [backend, dtype] = GetParam();
  const Tensor table = random_tensor({20, 37}, 8).to_dtype(dtype);
  Tensor ids = Tensor::empty(DType::kI64, {2, 3});
  const int64_t values[] = {0, 19, 4, 4, 7, 12};
  for (int i = 0; i < 6; ++i) ids.data<int64_t>()[i] = values[i];
  for (float scale : {1.f, 2.5f})
    testing::expect_matches_ref(
        backend,
        [&](Context& ctx) -> testing::Outputs {
          const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {2, 3, 37}));
          ops::embedding(
              ctx, {.ids = on(ctx, ids), .table = on(ctx, table), .out = out, .scale = scale});
          return testing::outputs({{"out", out}});
        },
        {.tol = testing::tolerance_for(DType::kF32)});
}

// The activations' int8 quantiser against a sequential reference that rounds
// with std::nearbyint: every value, scale and correction equal, including
// values that land exactly halfway between two integers (ties go to even).
TEST(QuantizeQ8Rows, MatchesNearbyintReference) {
  const int64_t M = 3, K = 300;  // a short last block of 44 values
  std::vector<float> x(M * K);
  for (int64_t i = 0; i < M * K; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.f;
  // Block 0 of row 0 has max |x| = 127: its values are their own q, so
  // halves like 2.5 and -3.5 test the ties.
  for (int64_t k = 0; k < cpu::kQ8ActBlock; ++k) x[k] = static_cast<float>(k % 16) * 0.5f - 4.f;
  x[5] = 127.f;
  std::vector<int8_t> work(static_cast<size_t>(cpu::q8_workspace_bytes(M, K)));
  const cpu::Q8Activations a = cpu::quantize_q8_rows(x.data(), K, M, K, work.data());
  for (int64_t m = 0; m < M; ++m) {
    double corr = 0;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const int64_t lo = b * cpu::kQ8ActBlock, hi = std::min(K, lo + cpu::kQ8ActBlock);
      float amax = 0.f;
      for (int64_t k = lo; k < hi; ++k) amax = std::max(amax, std::fabs(x[m * K + k]));
      const float inv = 127.f / amax;
      ASSERT_EQ(a.scales[m * a.blocks + b], amax / 127.f);
      int sum = 0;
      for (int64_t k = lo; k < hi; ++k) {
        const int q = std::clamp(static_cast<int>(std::nearbyint(x[m * K + k] * inv)), -127, 127);
        ASSERT_EQ(a.q[m * a.Kp + k], q) << m << " " << k << " " << x[m * K + k] * inv;
        sum += q;
      }
      corr += static_cast<double>(a.scales[m * a.blocks + b] * static_cast<float>(sum));
    }
    for (int64_t k = K; k < a.Kp; ++k) ASSERT_EQ(a.q[m * a.Kp + k], 0);
    EXPECT_NEAR(a.bias128[m], 128.0 * corr, 1e-4 * std::fabs(128.0 * corr) + 1e-6);
  }
}

// The GPU backend has no int8 kernels: its ops refuse Q8 weights by name
// (below) rather than run them.
std::vector<std::tuple<std::string, DType>> lowp_cases() {
  std::vector<std::tuple<std::string, DType>> cases;
  for (const std::string& b : testing::all_backends())
    for (DType dtype : {DType::kF16, DType::kBF16, DType::kQ8})
      if (!(testing::is_gpu_backend(b) && dtype == DType::kQ8)) cases.emplace_back(b, dtype);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearLowpTest, ::testing::ValuesIn(lowp_cases()), case_name);

TEST(LinearLowpGpu, Q8WeightsAreRefusedByName) {
  if (!testing::kGpuTests) GTEST_SKIP() << "the GPU backend's refusal (label gpu)";
  Context ctx("cuda", 1);
  const Tensor W = on(ctx, random_tensor({8, 32}, 1).to_dtype(DType::kQ8));
  const Tensor x = on(ctx, random_tensor({2, 32}, 2)), y = on(ctx, Tensor::zeros(DType::kF32, {2, 8}));
  Tensor ids = Tensor::zeros(DType::kI64, {1, 2});
  const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {1, 2, 32}));
  const auto refused = [](const std::function<void()>& op, const char* name) {
    try {
      op();
      ADD_FAILURE() << name << " ran with Q8 weights on cuda";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no kernel for Q8"), std::string::npos) << e.what();
    }
  };
  refused([&] { ops::linear(ctx, {.x = x, .W = W, .y = y}); }, "linear");
  refused([&] { ops::embedding(ctx, {.ids = on(ctx, ids), .table = W, .out = out}); }, "embedding");
}

}  // namespace
}  // namespace ssm
