// RMSNorm, the gated grouped norm and their backwards, row by row in double.
// Every norm is v -> v r w with r = 1 / sqrt(mean(v^2) + eps) over a run of
// n channels; its backward, for the gradient g of the output, is
//   dv = r w g - v r^3 / n sum(v w g),   dw += g v r.
#include "ops/ref/rms_norm.h"

#include <cmath>
#include <vector>

#include "ops/tensor_data.h"
#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"

namespace ssm::ref {
namespace {

using ops::elements;
using ops::elements_or_null;

double inv_rms(const double* v, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += v[i] * v[i];
  return 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
}

// The backward of one run of n channels (see the top); dw_sum may be null.
template <typename T>
void norm_backward(const double* v, const T* w, const double* g, int64_t n, double eps, double* dv,
                   double* dw_sum) {
  const double r = inv_rms(v, n, eps);
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) dot += v[i] * w[i] * g[i];
  for (int64_t i = 0; i < n; ++i) {
    dv[i] = r * w[i] * g[i] - v[i] * r * r * r / static_cast<double>(n) * dot;
    if (dw_sum) dw_sum[i] += g[i] * v[i] * r;
  }
}

template <typename T>
void widen(const T* p, int64_t n, std::vector<double>& out) {
  out.assign(p, p + n);
}

template <typename T>
void add_to(T* dst, const std::vector<double>& sum) {
  for (size_t i = 0; i < sum.size(); ++i) dst[i] = static_cast<T>(dst[i] + sum[i]);
}

}  // namespace

template <typename T>
void rms_norm(Context&, const ops::RmsNormArgs& a) {
  const int64_t R = a.x.rows(), D = a.x.cols(), ldx = a.x.row_stride(), ldo = a.out.row_stride();
  const T* w = elements_or_null<T>(a.w);
  std::vector<double> v;
  for (int64_t r = 0; r < R; ++r) {
    widen(a.x.data<T>() + r * ldx, D, v);
    const double s = inv_rms(v.data(), D, a.eps);
    T* out = elements<T>(a.out) + r * ldo;
    for (int64_t i = 0; i < D; ++i) out[i] = static_cast<T>(v[i] * s * (w ? static_cast<double>(w[i]) : 1.0));
  }
}

template <typename T>
void rms_norm_backward(Context&, const ops::RmsNormBackwardArgs& a) {
  const int64_t R = a.x.rows(), D = a.x.cols();
  const int64_t ldx = a.x.row_stride(), ldg = a.dout.row_stride(), lddx = a.dx.row_stride();
  std::vector<double> v, g, dv(static_cast<size_t>(D)), dw_sum(static_cast<size_t>(D), 0.0);
  for (int64_t r = 0; r < R; ++r) {
    widen(a.x.data<T>() + r * ldx, D, v);
    widen(a.dout.data<T>() + r * ldg, D, g);
    norm_backward(v.data(), a.w.data<T>(), g.data(), D, a.eps, dv.data(), dw_sum.data());
    T* dx = elements<T>(a.dx) + r * lddx;
    for (int64_t i = 0; i < D; ++i) dx[i] = static_cast<T>(a.accumulate_dx ? dx[i] + dv[i] : dv[i]);
  }
  if (a.dw.defined()) add_to(elements<T>(a.dw), dw_sum);
}

template <typename T>
void gated_rms_norm(Context&, const ops::GatedRmsNormArgs& a) {
  const int64_t R = a.y.rows(), D = a.y.cols(), n = a.group ? a.group : D;
  const int64_t ldy = a.y.row_stride(), ldz = a.z.row_stride(), ldo = a.out.row_stride();
  const T* w = elements_or_null<T>(a.w);
  std::vector<double> v(static_cast<size_t>(D)), gate(static_cast<size_t>(D));
  for (int64_t r = 0; r < R; ++r) {
    const T* y = a.y.data<T>() + r * ldy;
    const T* z = a.z.data<T>() + r * ldz;
    for (int64_t i = 0; i < D; ++i) {
      gate[i] = ops::silu(static_cast<double>(z[i]));
      v[i] = w && a.norm_before_gate ? y[i] : y[i] * gate[i];
    }
    if (w)
      for (int64_t g0 = 0; g0 < D; g0 += n) {
        const double s = inv_rms(v.data() + g0, n, a.eps);
        for (int64_t i = g0; i < g0 + n; ++i)
          v[i] = v[i] * s * w[i] * (a.norm_before_gate ? gate[i] : 1.0);
      }
    T* out = elements<T>(a.out) + r * ldo;  // may be y: written after y is read
    for (int64_t i = 0; i < D; ++i) out[i] = static_cast<T>(v[i]);
  }
}

template <typename T>
void gated_rms_norm_backward(Context&, const ops::GatedRmsNormBackwardArgs& a) {
  const int64_t R = a.y.rows(), D = a.y.cols(), n = a.group ? a.group : D;
  const int64_t ldy = a.y.row_stride(), ldz = a.z.row_stride(), ldg = a.dout.row_stride();
  const int64_t lddy = a.dy.row_stride(), lddz = a.dz.row_stride();
  const T* w = elements_or_null<T>(a.w);
  const size_t d = static_cast<size_t>(D);
  std::vector<double> v(d), g(d), dv(d), dw_sum(d, 0.0);
  for (int64_t r = 0; r < R; ++r) {
    const T* y = a.y.data<T>() + r * ldy;
    const T* z = a.z.data<T>() + r * ldz;
    const T* dout = a.dout.data<T>() + r * ldg;
    T* dy = elements<T>(a.dy) + r * lddy;
    T* dz = elements<T>(a.dz) + r * lddz;
    if (!w) {  // out = y silu(z)
      for (int64_t i = 0; i < D; ++i) {
        dy[i] = static_cast<T>(dout[i] * ops::silu(static_cast<double>(z[i])));
        dz[i] = static_cast<T>(dout[i] * y[i] * ops::silu_grad(static_cast<double>(z[i])));
      }
      continue;
    }
    if (!a.norm_before_gate) {  // out = norm(v) w, v = y silu(z)
      for (int64_t i = 0; i < D; ++i) {
        v[i] = y[i] * ops::silu(static_cast<double>(z[i]));
        g[i] = dout[i];
      }
      for (int64_t g0 = 0; g0 < D; g0 += n)
        norm_backward(v.data() + g0, w + g0, g.data() + g0, n, a.eps, dv.data() + g0,
                      a.dw.defined() ? dw_sum.data() + g0 : nullptr);
      for (int64_t i = 0; i < D; ++i) {
        dy[i] = static_cast<T>(dv[i] * ops::silu(static_cast<double>(z[i])));
        dz[i] = static_cast<T>(dv[i] * y[i] * ops::silu_grad(static_cast<double>(z[i])));
      }
      continue;
    }
    // out = norm(y) w silu(z): the norm sees the gradient dout silu(z).
    for (int64_t i = 0; i < D; ++i) {
      v[i] = y[i];
      g[i] = dout[i] * ops::silu(static_cast<double>(z[i]));
    }
    for (int64_t g0 = 0; g0 < D; g0 += n) {
      const double s = inv_rms(v.data() + g0, n, a.eps);
      for (int64_t i = g0; i < g0 + n; ++i)
        dz[i] =
            static_cast<T>(dout[i] * v[i] * s * w[i] * ops::silu_grad(static_cast<double>(z[i])));
      norm_backward(v.data() + g0, w + g0, g.data() + g0, n, a.eps, dv.data() + g0,
                    a.dw.defined() ? dw_sum.data() + g0 : nullptr);
    }
    for (int64_t i = 0; i < D; ++i) dy[i] = static_cast<T>(dv[i]);
  }
  if (a.dw.defined() && w) add_to(elements<T>(a.dw), dw_sum);
}

template void rms_norm<float>(Context&, const ops::RmsNormArgs&);
template void rms_norm<double>(Context&, const ops::RmsNormArgs&);
template void rms_norm_backward<float>(Context&, const ops::RmsNormBackwardArgs&);
template void rms_norm_backward<double>(Context&, const ops::RmsNormBackwardArgs&);
template void gated_rms_norm<float>(Context&, const ops::GatedRmsNormArgs&);
template void gated_rms_norm<double>(Context&, const ops::GatedRmsNormArgs&);
template void gated_rms_norm_backward<float>(Context&, const ops::GatedRmsNormBackwardArgs&);
template void gated_rms_norm_backward<double>(Context&, const ops::GatedRmsNormBackwardArgs&);

void add_norm_kernels(OpTable& t) {
  t.rms_norm = &rms_norm<float>;
  t.rms_norm_backward = &rms_norm_backward<float>;
  t.gated_rms_norm = &gated_rms_norm<float>;
  t.gated_rms_norm_backward = &gated_rms_norm_backward<float>;
}

}  // namespace ssm::ref
