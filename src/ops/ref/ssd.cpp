// The dt/decay preparation and the SSD scan as the plain recurrence of
// SPEC §3, one time step after another in double:
//   S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T,   y_t = S_t C_t + D x_t.
// The backward is in ssd_backward.cpp.
#include "ops/ref/ssd.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/tensor_data.h"
#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"
#include "ops/ssd_step_composed.h"

namespace ssm::ref {

using ops::elements;
using ops::elements_or_null;

template <typename T>
void ssd_prepare(Context&, const ops::SsdPrepareArgs& a) {
  const int64_t R = a.dt_raw.rows(), H = a.dt_raw.cols();
  const int64_t ldr = a.dt_raw.row_stride(), ldt = a.dt.row_stride();
  const T* bias = a.dt_bias.data<T>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const double sp =
          ops::softplus(static_cast<double>(a.dt_raw.data<T>()[r * ldr + h]) + bias[h]);
      elements<T>(a.dt)[r * ldt + h] = static_cast<T>(std::clamp<double>(sp, a.dt_min, a.dt_max));
    }
  for (int64_t h = 0; h < H; ++h)
    elements<T>(a.A)[h] = static_cast<T>(-std::exp(static_cast<double>(a.A_log.data<T>()[h])));
}

template <typename T>
void ssd_prepare_backward(Context&, const ops::SsdPrepareBackwardArgs& a) {
  const int64_t R = a.dt_raw.rows(), H = a.dt_raw.cols();
  const int64_t ldr = a.dt_raw.row_stride(), ldg = a.ddt.row_stride();
  const int64_t ldo = a.ddt_raw.row_stride();
  const T* bias = a.dt_bias.data<T>();
  std::vector<double> bias_sum(static_cast<size_t>(H), 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const double raw = static_cast<double>(a.dt_raw.data<T>()[r * ldr + h]) + bias[h];
      const double sp = ops::softplus(raw);
      // The clamp passes no gradient where it is active.
      const bool passes = sp >= a.dt_min && sp <= a.dt_max;
      const double d = passes ? a.ddt.data<T>()[r * ldg + h] * ops::softplus_grad(raw) : 0.0;
      elements<T>(a.ddt_raw)[r * ldo + h] = static_cast<T>(d);
      bias_sum[h] += d;
    }
  T* ddt_bias = elements_or_null<T>(a.ddt_bias);
  T* dA_log = elements_or_null<T>(a.dA_log);
  for (int64_t h = 0; h < H; ++h) {
    if (ddt_bias) ddt_bias[h] = static_cast<T>(ddt_bias[h] + bias_sum[h]);
    // dA/dA_log = -exp(A_log) = A.
    if (dA_log)
      dA_log[h] =
          static_cast<T>(dA_log[h] + static_cast<double>(a.dA.data<T>()[h]) *
                                         -std::exp(static_cast<double>(a.A_log.data<T>()[h])));
  }
}

template <typename T>
void ssd_scan(Context&, const ops::SsdScanArgs& a) {
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), H = a.A.dim(0), P = a.x.cols() / H;
  const int64_t G = a.groups, N = a.B.cols() / G;
  const int64_t ldx = a.x.row_stride(), ldb = a.B.row_stride(), ldc = a.C.row_stride();
  const int64_t ldt = a.dt.row_stride(), ldy = a.y.row_stride();
  const T* D = elements_or_null<T>(a.D);
  T* state = elements_or_null<T>(a.state);
  std::vector<double> S(static_cast<size_t>(P * N));
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      T* st = state ? state + (b * H + h) * P * N : nullptr;
      for (int64_t i = 0; i < P * N; ++i) S[i] = st ? static_cast<double>(st[i]) : 0.0;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t;
        const double dt = a.dt.data<T>()[row * ldt + h];
        const double decay = std::exp(dt * a.A.data<T>()[h]);
        const T* x = a.x.data<T>() + row * ldx + h * P;
        const T* Bt = a.B.data<T>() + row * ldb + g * N;
        const T* Ct = a.C.data<T>() + row * ldc + g * N;
        T* y = elements<T>(a.y) + row * ldy + h * P;
        for (int64_t p = 0; p < P; ++p) {
          double acc = D ? static_cast<double>(D[h]) * x[p] : 0.0;
          for (int64_t n = 0; n < N; ++n) {
            double& s = S[p * N + n];
            s = decay * s + dt * x[p] * Bt[n];
            acc += s * Ct[n];
          }
          y[p] = static_cast<T>(acc);
        }
      }
      if (st)
        for (int64_t i = 0; i < P * N; ++i) st[i] = static_cast<T>(S[i]);
    }
}

template void ssd_prepare<float>(Context&, const ops::SsdPrepareArgs&);
template void ssd_prepare<double>(Context&, const ops::SsdPrepareArgs&);
template void ssd_prepare_backward<float>(Context&, const ops::SsdPrepareBackwardArgs&);
template void ssd_prepare_backward<double>(Context&, const ops::SsdPrepareBackwardArgs&);
template void ssd_scan<float>(Context&, const ops::SsdScanArgs&);
template void ssd_scan<double>(Context&, const ops::SsdScanArgs&);

void add_ssd_kernels(OpTable& t) {
  t.ssd_prepare = &ssd_prepare<float>;
  t.ssd_prepare_backward = &ssd_prepare_backward<float>;
  t.ssd_scan = &ssd_scan<float>;
  t.ssd_scan_backward = &ssd_scan_backward<float>;
  t.ssd_step = &ops::detail::ssd_step_composed;
}

}  // namespace ssm::ref
