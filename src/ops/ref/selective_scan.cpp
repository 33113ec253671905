// The Mamba-1 selective scan as the plain recurrence of its header, one
// channel and one time step after another, in double.
#include <cmath>
#include <vector>

#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"
#include "ssm/ops/selective_scan.h"

namespace ssm::ref {
namespace {

using ops::elements;
using ops::elements_or_null;

void selective_scan(Context&, const ops::SelectiveScanArgs& a) {
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  const ops::Rows<const float> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C);
  const ops::Rows<float> y(a.y);
  const float* dt_bias = elements_or_null<const float>(a.dt_bias);
  const float* Dskip = elements_or_null<const float>(a.D);
  const float* A_log = a.A_log.data<float>();
  float* state = elements_or_null<float>(a.state);
  std::vector<double> S(static_cast<size_t>(N)), A(static_cast<size_t>(N));
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t d = 0; d < D; ++d) {
      float* st = state ? state + (b * D + d) * N : nullptr;
      for (int64_t n = 0; n < N; ++n) {
        S[n] = st ? static_cast<double>(st[n]) : 0.0;
        A[n] = -std::exp(static_cast<double>(A_log[d * N + n]));
      }
      for (int64_t t = 0; t < L; ++t) {
        const int64_t r = b * L + t;
        const double dt = ops::softplus(static_cast<double>(dt_raw[r][d]) + (dt_bias ? dt_bias[d] : 0.0));
        const double u = x[r][d];
        double acc = Dskip ? Dskip[d] * u : 0.0;
        for (int64_t n = 0; n < N; ++n) {
          S[n] = std::exp(dt * A[n]) * S[n] + dt * u * Bm[r][n];
          acc += S[n] * Cm[r][n];
        }
        if (a.z.defined()) acc *= ops::silu(static_cast<double>(ops::row<const float>(a.z, r)[d]));
        y[r][d] = static_cast<float>(acc);
      }
      if (st)
        for (int64_t n = 0; n < N; ++n) st[n] = static_cast<float>(S[n]);
    }
}

}  // namespace

void add_selective_scan_kernels(OpTable& t) { t.selective_scan = &selective_scan; }

}  // namespace ssm::ref
