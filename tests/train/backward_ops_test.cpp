// Backward ops against finite differences of float64 re-implementations of
// their forwards (J = sum(w * out) for a random w), on small shapes, with 1
// and 2 threads.
#include <gtest/gtest.h>

#include <cmath>

#include "fd.h"
#include "ssm/train/ops/conv1d_backward.h"
#include "ssm/train/ops/cross_entropy.h"
#include "ssm/train/ops/linear_backward.h"
#include "ssm/train/ops/rms_norm_backward.h"

namespace ssm {
namespace {

using testing::dot;
using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

constexpr double kTol = 2e-5;

double silu(double x) { return x / (1 + std::exp(-x)); }

TEST(LinearBackward, MatchesFiniteDifferences) {
  const int64_t M = 7, K = 5, N = 40;
  auto x = random_doubles(M * K, 1), W = random_doubles(N * K, 2), b = random_doubles(N, 3);
  const auto w = random_doubles(M * N, 4);
  auto J = [&] {
    double s = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double y = b[n];
        for (int64_t k = 0; k < K; ++k) y += x[m * K + k] * W[n * K + k];
        s += w[m * N + n] * y;
      }
    return s;
  };
  const auto gx = fd_gradient(x, J), gW = fd_gradient(W, J), gb = fd_gradient(b, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const auto xf = to_float(x), Wf = to_float(W), wf = to_float(w);
    std::vector<float> dx(M * K), dW(N * K, 0.f), db(N, 0.f);
    ops::linear_backward({.M = M, .K = K, .N = N, .x = xf.data(), .W = Wf.data(), .dy = wf.data(),
                          .dx = dx.data(), .dW = dW.data(), .dbias = db.data()},
                         pool);
    EXPECT_LE(rel_error(dx, gx), kTol);
    EXPECT_LE(rel_error(dW, gW), kTol);
    EXPECT_LE(rel_error(db, gb), kTol);
  }
}

TEST(RmsNormBackward, MatchesFiniteDifferencesAndAccumulates) {
  const int64_t rows = 70, dim = 12;  // more rows than one partial-sum block
  auto x = random_doubles(rows * dim, 5), wt = random_doubles(dim, 6, 0.5f, 1.5f);
  const auto w = random_doubles(rows * dim, 7);
  const double eps = 1e-5;
  auto J = [&] {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
      const double inv = 1 / std::sqrt(ss / dim + eps);
      for (int64_t i = 0; i < dim; ++i) s += w[r * dim + i] * x[r * dim + i] * inv * wt[i];
    }
    return s;
  };
  const auto gx = fd_gradient(x, J), gw = fd_gradient(wt, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const auto xf = to_float(x), wtf = to_float(wt), wf = to_float(w);
    std::vector<float> dx(rows * dim, 1.f), dw(dim, 0.f);
    ops::rms_norm_backward(xf.data(), wtf.data(), wf.data(), rows, dim, 1e-5f, dx.data(), true,
                           dw.data(), pool);
    for (float& v : dx) v -= 1.f;  // accumulate_dx added to the ones
    EXPECT_LE(rel_error(dx, gx), kTol);
    EXPECT_LE(rel_error(dw, gw), kTol);
  }
}

// out = norm(y * silu(z)) * w, norm(y) * w * silu(z), or y * silu(z).
enum class GateMode { kNormAfterGate, kNormBeforeGate, kNoNorm };

class GatedNormBackward : public ::testing::TestWithParam<GateMode> {};

TEST_P(GatedNormBackward, MatchesFiniteDifferences) {
  const GateMode mode = GetParam();
  const int64_t rows = 40, dim = 12, group = 4, ldz = 15;
  auto y = random_doubles(rows * dim, 8), z = random_doubles(rows * ldz, 9, -3.f, 3.f);
  auto wt = random_doubles(dim, 10, 0.5f, 1.5f);
  const auto w = random_doubles(rows * dim, 11);
  auto J = [&] {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g0 = 0; g0 < dim; g0 += group) {
        double v[64], ss = 0;
        for (int64_t i = g0; i < g0 + group; ++i) {
          v[i] = mode == GateMode::kNormBeforeGate ? y[r * dim + i] : y[r * dim + i] * silu(z[r * ldz + i]);
          ss += v[i] * v[i];
        }
        const double inv = mode == GateMode::kNoNorm ? 1.0 : 1 / std::sqrt(ss / group + 1e-5);
        for (int64_t i = g0; i < g0 + group; ++i) {
          double o = v[i] * inv * (mode == GateMode::kNoNorm ? 1.0 : wt[i]);
          if (mode == GateMode::kNormBeforeGate) o *= silu(z[r * ldz + i]);
          s += w[r * dim + i] * o;
        }
      }
    return s;
  };
  const auto gy = fd_gradient(y, J), gz = fd_gradient(z, J), gw = fd_gradient(wt, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const auto yf = to_float(y), zf = to_float(z), wtf = to_float(wt), wf = to_float(w);
    std::vector<float> dy(rows * dim), dz(rows * ldz, 0.f), dw(dim, 0.f);
    ops::gated_rms_norm_backward({.rows = rows, .dim = dim, .group = group, .eps = 1e-5f,
                                  .norm_before_gate = mode == GateMode::kNormBeforeGate,
                                  .y = yf.data(), .z = zf.data(), .ldz = ldz,
                                  .w = mode == GateMode::kNoNorm ? nullptr : wtf.data(),
                                  .dout = wf.data(), .dy = dy.data(), .dz = dz.data(), .lddz = ldz,
                                  .dw = mode == GateMode::kNoNorm ? nullptr : dw.data()},
                                 pool);
    EXPECT_LE(rel_error(dy, gy), kTol);
    EXPECT_LE(rel_error(dz, gz), kTol);
    if (mode != GateMode::kNoNorm) {
      EXPECT_LE(rel_error(dw, gw), kTol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GatedNormBackward,
                         ::testing::Values(GateMode::kNormAfterGate, GateMode::kNormBeforeGate,
                                           GateMode::kNoNorm));

class Conv1dBackward : public ::testing::TestWithParam<bool /*silu*/> {};

TEST_P(Conv1dBackward, MatchesFiniteDifferences) {
  const bool use_silu = GetParam();
  const int64_t B = 2, L = 9, C = 20, K = 4, ld = 23;
  auto in = random_doubles(B * L * ld, 12), wt = random_doubles(C * K, 13), bias = random_doubles(C, 14);
  const auto w = random_doubles(B * L * C, 15);
  auto J = [&] {
    double s = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t c = 0; c < C; ++c) {
          double acc = bias[c];
          for (int64_t k = 0; k < K; ++k) {
            const int64_t src = t - K + 1 + k;
            if (src >= 0) acc += wt[c * K + k] * in[(b * L + src) * ld + c];
          }
          s += w[(b * L + t) * C + c] * (use_silu ? silu(acc) : acc);
        }
    return s;
  };
  const auto gin = fd_gradient(in, J), gw = fd_gradient(wt, J), gb = fd_gradient(bias, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const auto inf = to_float(in), wtf = to_float(wt), bf = to_float(bias), wf = to_float(w);
    std::vector<float> din(B * L * ld, 0.f), dw(C * K, 0.f), db(C, 0.f);
    ops::causal_conv1d_backward({.batch = B, .length = L, .channels = C, .kernel = K,
                                 .in = inf.data(), .ld_in = ld, .weight = wtf.data(),
                                 .bias = bf.data(), .silu = use_silu, .dout = wf.data(),
                                 .din = din.data(), .ld_din = ld, .dweight = dw.data(),
                                 .dbias = db.data()},
                                pool);
    EXPECT_LE(rel_error(din, gin), kTol);
    EXPECT_LE(rel_error(dw, gw), kTol);
    EXPECT_LE(rel_error(db, gb), kTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Silu, Conv1dBackward, ::testing::Bool());

TEST(HeadCrossEntropy, LossAndGradientsMatchFiniteDifferences) {
  // 11 rows in blocks of 4, a head with padded rows beyond V, some rows
  // without a target.
  const int64_t rows = 11, D = 6, V = 13, V_padded = 16;
  auto f = random_doubles(rows * D, 16, -2.f, 2.f), head = random_doubles(V_padded * D, 17, -2.f, 2.f);
  std::vector<int64_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 4 == 3 ? -1 : (r * 5) % V;
  const double scale = 0.37;
  auto loss = [&] {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (targets[r] < 0) continue;
      std::vector<double> l(V);
      double mx = -1e300;
      for (int64_t v = 0; v < V; ++v) {
        l[v] = 0;
        for (int64_t d = 0; d < D; ++d) l[v] += f[r * D + d] * head[v * D + d];
        mx = std::max(mx, l[v]);
      }
      double se = 0;
      for (double x : l) se += std::exp(x - mx);
      s += mx + std::log(se) - l[targets[r]];
    }
    return s;
  };
  const double ref_loss = loss();
  auto J = [&] { return scale * loss(); };
  const auto gf = fd_gradient(f, J), ghead = fd_gradient(head, J);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const auto ff = to_float(f), hf = to_float(head);
    std::vector<float> df(rows * D), dhead(V_padded * D, 0.f);
    const double got = ops::head_cross_entropy({.rows = rows, .D = D, .V = V, .f = ff.data(),
                                                .head = hf.data(), .targets = targets.data(),
                                                .grad_scale = scale, .df = df.data(),
                                                .dhead = dhead.data(), .block_rows = 4},
                                               pool);
    EXPECT_NEAR(got, ref_loss, 1e-5 * ref_loss);
    EXPECT_LE(rel_error(df, gf), kTol);
    EXPECT_LE(rel_error(dhead, ghead), kTol);  // padded rows: zero in both
    const double only_loss = ops::head_cross_entropy(
        {.rows = rows, .D = D, .V = V, .f = ff.data(), .head = hf.data(), .targets = targets.data(),
         .block_rows = 4},
        pool);
    EXPECT_EQ(only_loss, got);
  }
}

}  // namespace
}  // namespace ssm
