// mamba3_scan_backward, the reference: back-propagation through the
// sequential recurrence of ref/mamba3_scan.cpp, in double. Per (batch row,
// head), with U_t = sum_r v_t,r k_t,r^T (U_{-1} from k_prev, v_prev):
//   S_t = alpha_t S_{t-1} + beta_t U_{t-1} + gamma_t U_t,  o_t,r = S_t q_t,r + D v_t,r.
// Walking back from the last step, G_t (the gradient of S_t) is alpha_{t+1}
// G_{t+1} plus sum_r d_o_t,r q_t,r^T; U_t gets gamma_t G_t + beta_{t+1} G_{t+1}.
#include <vector>

#include "ops/ref/mamba3_ref.h"

namespace ssm::ref {

using namespace m3;

template <typename T>
void mamba3_scan_backward(const ops::Mamba3ScanBackwardArgs& g) {
  const ops::Mamba3ScanArgs& a = g.fwd;
  const int64_t B = a.q.dim(0), H = a.q.dim(1), L = a.q.dim(2), R = a.q.dim(3);
  const int64_t N = a.q.dim(4), P = a.v.dim(4), PN = P * N;
  const T *q = a.q.data<T>(), *k = a.k.data<T>(), *v = a.v.data<T>();
  const T *dt = a.dt.data<T>(), *A = a.A.data<T>(), *lam = a.lam.data<T>();
  const T *D = in_or_null<T>(a.D), *d_o = g.d_o.data<T>();
  T *dq = out<T>(g.dq), *dk = out<T>(g.dk), *dv = out<T>(g.dv);
  T *ddt = out<T>(g.ddt), *dA = out<T>(g.dA), *dlam = out<T>(g.dlam);
  const bool carried = a.ssm.defined();

  std::vector<double> dD(H, 0.0), states((L + 1) * PN), k_prev(R * N), v_prev(R * P);
  std::vector<double> Gt(PN), Gnext(PN), dU(PN);
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const double Dh = D ? static_cast<double>(D[bh % H]) : 0.0;
    for (int64_t i = 0; i < PN; ++i) states[i] = carried ? a.ssm.data<T>()[bh * PN + i] : 0.0;
    for (int64_t i = 0; i < R * N; ++i)
      k_prev[i] = carried ? a.k_prev.data<T>()[bh * R * N + i] : 0.0;
    for (int64_t i = 0; i < R * P; ++i)
      v_prev[i] = carried ? a.v_prev.data<T>()[bh * R * P + i] : 0.0;
    // U_t[p, n]; t = -1 is the carried previous step.
    auto U = [&](int64_t t, int64_t p, int64_t n) {
      double u = 0;
      for (int64_t r = 0; r < R; ++r)
        u += t < 0 ? v_prev[r * P + p] * k_prev[r * N + n]
                   : static_cast<double>(v[((bh * L + t) * R + r) * P + p]) *
                         k[((bh * L + t) * R + r) * N + n];
      return u;
    };
    struct Coef {
      double alpha, beta, gamma;
    };
    auto coef = [&](int64_t t) {
      const int64_t s = bh * L + t;
      const double alpha = std::exp(static_cast<double>(A[s]) * dt[s]);
      return Coef{alpha, (1 - static_cast<double>(lam[s])) * dt[s] * alpha,
                  static_cast<double>(lam[s]) * dt[s]};
    };

    // Forward: states[t + 1] = S_t.
    for (int64_t t = 0; t < L; ++t) {
      const Coef c = coef(t);
      for (int64_t p = 0; p < P; ++p)
        for (int64_t n = 0; n < N; ++n)
          states[(t + 1) * PN + p * N + n] =
              c.alpha * states[t * PN + p * N + n] + c.beta * U(t - 1, p, n) + c.gamma * U(t, p, n);
    }

    std::fill(Gnext.begin(), Gnext.end(), 0.0);
    double beta_next = 0;
    for (int64_t t = L - 1; t >= 0; --t) {
      const int64_t step = bh * L + t;
      const Coef c = coef(t);
      const double* St = states.data() + (t + 1) * PN;
      const double* Sprev = states.data() + t * PN;
      const double alpha_next = t + 1 < L ? coef(t + 1).alpha : 0.0;
      for (int64_t i = 0; i < PN; ++i) Gt[i] = alpha_next * Gnext[i];
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = step * R + r;
        for (int64_t p = 0; p < P; ++p) {
          const double go = d_o[row * P + p];
          dD[bh % H] += go * v[row * P + p];
          for (int64_t n = 0; n < N; ++n) Gt[p * N + n] += go * q[row * N + n];
        }
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t p = 0; p < P; ++p) s += St[p * N + n] * d_o[row * P + p];
          dq[row * N + n] = static_cast<T>(s);
        }
      }
      double dalpha = 0, dbeta = 0, dgamma = 0;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t n = 0; n < N; ++n) {
          const double G = Gt[p * N + n];
          dalpha += G * Sprev[p * N + n];
          dbeta += G * U(t - 1, p, n);
          dgamma += G * U(t, p, n);
          dU[p * N + n] = c.gamma * G + beta_next * Gnext[p * N + n];
        }
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = step * R + r;
        for (int64_t p = 0; p < P; ++p) {
          double s = Dh * d_o[row * P + p];
          for (int64_t n = 0; n < N; ++n) s += dU[p * N + n] * k[row * N + n];
          dv[row * P + p] = static_cast<T>(s);
        }
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t p = 0; p < P; ++p) s += dU[p * N + n] * v[row * P + p];
          dk[row * N + n] = static_cast<T>(s);
        }
      }
      // alpha = exp(A dt), beta = (1 - lam) dt alpha, gamma = lam dt.
      const double At = A[step], dtt = dt[step], lt = lam[step];
      const double dalpha_all = dalpha + dbeta * (1 - lt) * dtt;
      dA[step] = static_cast<T>(dalpha_all * c.alpha * dtt);
      ddt[step] =
          static_cast<T>(dalpha_all * c.alpha * At + dbeta * (1 - lt) * c.alpha + dgamma * lt);
      dlam[step] = static_cast<T>(-dbeta * dtt * c.alpha + dgamma * dtt);
      std::swap(Gt, Gnext);
      beta_next = c.beta;
    }
  }
  accumulate<T>(g.dD, dD);
}

template void mamba3_scan_backward<float>(const ops::Mamba3ScanBackwardArgs&);
template void mamba3_scan_backward<double>(const ops::Mamba3ScanBackwardArgs&);

}  // namespace ssm::ref
