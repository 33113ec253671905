// Back-propagation through the SSD recurrence in double: keep every state
// S_t of a (batch row, head), then walk time backwards carrying dS, the
// gradient of S_t. With a_t = exp(dt_t A):
//   y_t = S_t C_t + D x_t          dS += dy_t C_t^T, dC_t += S_t^T dy_t
//   S_t = a_t S_{t-1} + dt_t x_t B_t^T
//       ddt_t = A a_t <dS, S_{t-1}> + x_t^T dS B_t,  dA += dt_t a_t <dS, S_{t-1}>
//       dx_t += dt_t dS B_t,  dB_t += dt_t dS^T x_t,  then dS <- a_t dS.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/tensor_data.h"
#include "ops/ref/ssd.h"

namespace ssm::ref {

template <typename T>
void ssd_scan_backward(Context&, const ops::SsdScanBackwardArgs& a) {
  const ops::SsdScanArgs& f = a.fwd;
  const int64_t Bn = f.x.dim(0), L = f.x.dim(1), H = f.A.dim(0), P = f.x.cols() / H;
  const int64_t G = f.groups, N = f.B.cols() / G, PN = P * N;
  const int64_t ldx = f.x.row_stride(), ldb = f.B.row_stride(), ldc = f.C.row_stride();
  const int64_t ldt = f.dt.row_stride(), ldy = a.dy.row_stride(), lddx = a.dx.row_stride();
  const int64_t lddb = a.dB.row_stride(), lddc = a.dC.row_stride(), lddt = a.ddt.row_stride();
  const T* A = f.A.data<T>();
  const T* D = ops::elements_or_null<T>(f.D);
  const T* state0 = ops::elements_or_null<T>(f.state);
  std::vector<double> S(static_cast<size_t>((L + 1) * PN)), dS(static_cast<size_t>(PN));
  std::vector<double> dB(static_cast<size_t>(L * G * N)), dC(dB.size());
  for (int64_t b = 0; b < Bn; ++b) {
    std::fill(dB.begin(), dB.end(), 0.0);
    std::fill(dC.begin(), dC.end(), 0.0);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      auto x_at = [&](int64_t t) { return f.x.data<T>() + (b * L + t) * ldx + h * P; };
      auto B_at = [&](int64_t t) { return f.B.data<T>() + (b * L + t) * ldb + g * N; };
      auto dt_at = [&](int64_t t) {
        return static_cast<double>(f.dt.data<T>()[(b * L + t) * ldt + h]);
      };
      for (int64_t i = 0; i < PN; ++i)
        S[i] = state0 ? static_cast<double>(state0[(b * H + h) * PN + i]) : 0.0;
      for (int64_t t = 0; t < L; ++t) {
        const double dt = dt_at(t), decay = std::exp(dt * A[h]);
        const T* x = x_at(t);
        const T* Bt = B_at(t);
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n)
            S[(t + 1) * PN + p * N + n] = decay * S[t * PN + p * N + n] + dt * x[p] * Bt[n];
      }
      std::fill(dS.begin(), dS.end(), 0.0);
      double dA = 0, dD = 0;
      for (int64_t t = L - 1; t >= 0; --t) {
        const int64_t row = b * L + t;
        const double dt = dt_at(t), decay = std::exp(dt * A[h]);
        const T* x = x_at(t);
        const T* Bt = B_at(t);
        const T* Ct = f.C.data<T>() + row * ldc + g * N;
        const T* dy = a.dy.data<T>() + row * ldy + h * P;
        const double* St = S.data() + (t + 1) * PN;
        const double* Sp = S.data() + t * PN;
        double* dCt = dC.data() + (t * G + g) * N;
        double* dBt = dB.data() + (t * G + g) * N;
        T* dx = ops::elements<T>(a.dx) + row * lddx + h * P;
        double through_decay = 0, ddt = 0;
        for (int64_t p = 0; p < P; ++p) {
          dD += static_cast<double>(dy[p]) * x[p];
          double dxp = (D ? static_cast<double>(D[h]) : 0.0) * dy[p], dSB = 0;
          for (int64_t n = 0; n < N; ++n) {
            double& ds = dS[p * N + n];
            ds += static_cast<double>(dy[p]) * Ct[n];
            dCt[n] += static_cast<double>(dy[p]) * St[p * N + n];
            through_decay += ds * Sp[p * N + n];
            dSB += ds * Bt[n];
            dBt[n] += dt * ds * x[p];
          }
          ddt += x[p] * dSB;
          dx[p] = static_cast<T>(dxp + dt * dSB);
        }
        ddt += A[h] * decay * through_decay;
        dA += dt * decay * through_decay;
        ops::elements<T>(a.ddt)[row * lddt + h] = static_cast<T>(ddt);
        for (double& ds : dS) ds *= decay;
      }
      ops::elements<T>(a.dA)[h] = static_cast<T>(a.dA.data<T>()[h] + dA);
      if (a.dD.defined()) ops::elements<T>(a.dD)[h] = static_cast<T>(a.dD.data<T>()[h] + dD);
    }
    for (int64_t t = 0; t < L; ++t)
      for (int64_t i = 0; i < G * N; ++i) {
        ops::elements<T>(a.dB)[(b * L + t) * lddb + i] = static_cast<T>(dB[t * G * N + i]);
        ops::elements<T>(a.dC)[(b * L + t) * lddc + i] = static_cast<T>(dC[t * G * N + i]);
      }
  }
}

template void ssd_scan_backward<float>(Context&, const ops::SsdScanBackwardArgs&);
template void ssd_scan_backward<double>(Context&, const ops::SsdScanBackwardArgs&);

}  // namespace ssm::ref
