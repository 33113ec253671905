// The Mamba-1 selective scan as the plain recurrence of its header, one
// channel and one time step after another, in double; its backward keeps
// every state of a channel and walks them back.
#include "ops/ref/selective_scan.h"

#include <cmath>
#include <vector>

#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::ref {

using ops::elements_or_null;

template <typename T>
void selective_scan(Context&, const ops::SelectiveScanArgs& a) {
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  const ops::Rows<const T> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C);
  const ops::Rows<T> y(a.y);
  const T* dt_bias = elements_or_null<const T>(a.dt_bias);
  const T* Dskip = elements_or_null<const T>(a.D);
  const T* A_log = a.A_log.data<T>();
  T* state = elements_or_null<T>(a.state);
  std::vector<double> S(static_cast<size_t>(N)), A(static_cast<size_t>(N));
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t d = 0; d < D; ++d) {
      T* st = state ? state + (b * D + d) * N : nullptr;
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
        if (a.z.defined()) acc *= ops::silu(static_cast<double>(ops::row<const T>(a.z, r)[d]));
        y[r][d] = static_cast<T>(acc);
      }
      if (st)
        for (int64_t n = 0; n < N; ++n) st[n] = static_cast<T>(S[n]);
    }
}

template <typename T>
void selective_scan_backward(Context&, const ops::SelectiveScanBackwardArgs& g) {
  const ops::SelectiveScanArgs& a = g.fwd;
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  const ops::Rows<const T> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C), dy(g.dy);
  const ops::Rows<T> dx(g.dx), ddt_raw(g.ddt_raw);
  const T* dt_bias = elements_or_null<const T>(a.dt_bias);
  const T* Dskip = elements_or_null<const T>(a.D);
  const T* A_log = a.A_log.data<T>();
  const T* state = elements_or_null<const T>(a.state);
  T* ddt_bias = elements_or_null<T>(g.ddt_bias);
  T* dA_log = elements_or_null<T>(g.dA_log);
  T* dDskip = elements_or_null<T>(g.dD);
  // dB and dC sum over every channel: in double here, written at the end.
  std::vector<double> dB(static_cast<size_t>(Bn * L * N)), dC(dB.size());
  std::vector<double> S(static_cast<size_t>((L + 1) * N)), A(static_cast<size_t>(N));
  std::vector<double> dS(static_cast<size_t>(N)), dA(static_cast<size_t>(N));
  std::vector<double> dts(static_cast<size_t>(L));
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t n = 0; n < N; ++n) A[n] = -std::exp(static_cast<double>(A_log[d * N + n]));
    std::fill(dA.begin(), dA.end(), 0.0);
    double dbias = 0, dskip = 0;
    for (int64_t b = 0; b < Bn; ++b) {
      // S[t + 1] is the state after step t; S[0] the initial one.
      for (int64_t n = 0; n < N; ++n) S[n] = state ? static_cast<double>(state[(b * D + d) * N + n]) : 0.0;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t r = b * L + t;
        dts[t] = ops::softplus(static_cast<double>(dt_raw[r][d]) + (dt_bias ? dt_bias[d] : 0.0));
        const double u = x[r][d];
        for (int64_t n = 0; n < N; ++n)
          S[(t + 1) * N + n] = std::exp(dts[t] * A[n]) * S[t * N + n] + dts[t] * u * Bm[r][n];
      }
      std::fill(dS.begin(), dS.end(), 0.0);
      for (int64_t t = L - 1; t >= 0; --t) {
        const int64_t r = b * L + t;
        const double u = x[r][d], dt = dts[t];
        const double* St = S.data() + (t + 1) * N;
        const double* Sp = S.data() + t * N;
        double pre = Dskip ? Dskip[d] * u : 0.0;
        for (int64_t n = 0; n < N; ++n) pre += St[n] * Cm[r][n];
        double dpre = dy[r][d];
        if (a.z.defined()) {
          const double zv = ops::row<const T>(a.z, r)[d];
          ops::row<T>(g.dz, r)[d] = static_cast<T>(dpre * pre * ops::silu_grad(zv));
          dpre *= ops::silu(zv);
        }
        double du = Dskip ? dpre * Dskip[d] : 0.0, ddt = 0;
        dskip += dpre * u;
        for (int64_t n = 0; n < N; ++n) {
          dC[r * N + n] += dpre * St[n];
          dS[n] += dpre * Cm[r][n];
          const double decay = std::exp(dt * A[n]);
          dB[r * N + n] += dS[n] * dt * u;
          du += dS[n] * dt * Bm[r][n];
          ddt += dS[n] * (A[n] * decay * Sp[n] + u * Bm[r][n]);
          dA[n] += dS[n] * dt * decay * Sp[n];
          dS[n] *= decay;
        }
        dx[r][d] = static_cast<T>(du);
        const double draw = ddt * ops::softplus_grad(static_cast<double>(dt_raw[r][d]) + (dt_bias ? dt_bias[d] : 0.0));
        ddt_raw[r][d] = static_cast<T>(draw);
        dbias += draw;
      }
    }
    if (ddt_bias) ddt_bias[d] = static_cast<T>(ddt_bias[d] + dbias);
    if (dDskip) dDskip[d] = static_cast<T>(dDskip[d] + dskip);
    if (dA_log)
      for (int64_t n = 0; n < N; ++n) dA_log[d * N + n] = static_cast<T>(dA_log[d * N + n] + dA[n] * A[n]);
  }
  const ops::Rows<T> dBo(g.dB), dCo(g.dC);
  for (int64_t r = 0; r < Bn * L; ++r)
    for (int64_t n = 0; n < N; ++n) {
      dBo[r][n] = static_cast<T>(dB[r * N + n]);
      dCo[r][n] = static_cast<T>(dC[r * N + n]);
    }
}

template void selective_scan<float>(Context&, const ops::SelectiveScanArgs&);
template void selective_scan<double>(Context&, const ops::SelectiveScanArgs&);
template void selective_scan_backward<float>(Context&, const ops::SelectiveScanBackwardArgs&);
template void selective_scan_backward<double>(Context&, const ops::SelectiveScanBackwardArgs&);

void add_selective_scan_kernels(OpTable& t) {
  t.selective_scan = &selective_scan<float>;
  t.selective_scan_backward = &selective_scan_backward<float>;
}

}  // namespace ssm::ref
