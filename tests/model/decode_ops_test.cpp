// The single-token ops against their sequence forms: ssd_step against the
// sequential oracle ssd_scan_reference, conv1d step against causal_conv1d
// over the whole sequence, for several shapes and thread counts.
#include <gtest/gtest.h>

#include "ssm/ops/conv1d.h"
#include "ssm/ops/ssd_scan.h"
#include "ssm/ops/ssd_step.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

using testing::max_rel_error;
using testing::random_vector;

struct StepShape {
  int64_t B, H, P, N, G;
};

TEST(SsdStep, StepsEqualTheSequentialScan) {
  for (const StepShape& s : {StepShape{1, 4, 8, 16, 1}, StepShape{3, 6, 4, 20, 2}, StepShape{2, 8, 16, 7, 4}}) {
    const int64_t L = 9, width = s.H * s.P + 2 * s.G * s.N;  // x | B | C in one row
    const auto xbc = random_vector(s.B * L * width, 1);
    auto dt = random_vector(s.B * L * s.H, 2, 0.01f, 0.5f);
    const auto A = random_vector(s.H, 3, -2.f, -0.1f);
    const auto D = random_vector(s.H, 4);
    const auto init = random_vector(s.B * s.H * s.P * s.N, 5);
    std::vector<float> y_ref(s.B * L * s.H * s.P), st_ref = init;
    ops::SsdScanArgs scan{.batch = s.B, .length = L, .heads = s.H, .headdim = s.P,
                          .d_state = s.N, .groups = s.G, .x = xbc.data(), .ld_x = width,
                          .B = xbc.data() + s.H * s.P, .C = xbc.data() + s.H * s.P + s.G * s.N,
                          .ld_bc = width, .dt = dt.data(), .ld_dt = s.H, .A = A.data(),
                          .D = D.data(), .y = y_ref.data(), .ld_y = s.H * s.P,
                          .state = st_ref.data()};
    ops::ssd_scan_reference(scan);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(y_ref.size()), st = init;
      // Rows of one time step: (b, t) lives at row b * L + t, so stride L rows.
      for (int64_t t = 0; t < L; ++t) {
        const float* row = xbc.data() + t * width;
        ops::ssd_step({.batch = s.B, .heads = s.H, .headdim = s.P, .d_state = s.N, .groups = s.G,
                       .x = row, .ld_x = L * width, .B = row + s.H * s.P,
                       .C = row + s.H * s.P + s.G * s.N, .ld_bc = L * width,
                       .dt = dt.data() + t * s.H, .ld_dt = L * s.H, .A = A.data(), .D = D.data(),
                       .y = y.data() + t * s.H * s.P, .ld_y = L * s.H * s.P, .state = st.data()},
                      pool);
      }
      EXPECT_LE(max_rel_error(y.data(), y_ref.data(), y.size()), 1e-5) << threads;
      EXPECT_LE(max_rel_error(st.data(), st_ref.data(), st.size()), 1e-5) << threads;
    }
  }
}

TEST(Conv1dStep, StepsEqualTheWholeSequence) {
  for (int64_t K : {1, 2, 4}) {
    for (bool with_bias : {false, true}) {
      const int64_t B = 3, L = 7, C = 300, ld = C + 5;
      const auto in = random_vector(B * L * ld, 11);
      const auto w = random_vector(C * K, 12);
      const auto bias = random_vector(C, 13);
      const auto init = random_vector(B * (K - 1) * C, 14);
      std::vector<float> out_ref(B * L * C), st_ref = init;
      ThreadPool one(1);
      ops::causal_conv1d({.batch = B, .length = L, .channels = C, .kernel = K, .in = in.data(),
                          .ld_in = ld, .weight = w.data(), .bias = with_bias ? bias.data() : nullptr,
                          .state = st_ref.data(), .out = out_ref.data(), .silu = true},
                         one);
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> out(B * L * C), st = init, step_out(B * C);
        for (int64_t t = 0; t < L; ++t) {
          ops::causal_conv1d_step({.batch = B, .channels = C, .kernel = K, .in = in.data() + t * ld,
                                   .ld_in = L * ld, .weight = w.data(),
                                   .bias = with_bias ? bias.data() : nullptr, .state = st.data(),
                                   .out = step_out.data(), .silu = true},
                                  pool);
          for (int64_t b = 0; b < B; ++b)
            std::copy_n(step_out.data() + b * C, C, out.data() + (b * L + t) * C);
        }
        // Same taps in the same order: equal to the last bit.
        EXPECT_EQ(out, out_ref) << "K " << K << ", " << threads << " threads";
        EXPECT_EQ(st, st_ref) << "K " << K;
      }
    }
  }
}

}  // namespace
}  // namespace ssm
