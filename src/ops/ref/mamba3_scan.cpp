// mamba3_scan, the reference: SPEC §4's trapezoidal recurrence one step at a
// time, the state held in double.
#include <vector>

#include "ops/ref/mamba3_ref.h"

namespace ssm::ref {

using namespace m3;

template <typename T>
void mamba3_scan(const ops::Mamba3ScanArgs& a) {
  const int64_t B = a.q.dim(0), H = a.q.dim(1), L = a.q.dim(2), R = a.q.dim(3);
  const int64_t N = a.q.dim(4), P = a.v.dim(4);
  const T *q = a.q.data<T>(), *k = a.k.data<T>(), *v = a.v.data<T>();
  const T *dt = a.dt.data<T>(), *A = a.A.data<T>(), *lam = a.lam.data<T>();
  const T* D = in_or_null<T>(a.D);
  T* o = out<T>(a.o);
  const bool carried = a.ssm.defined();
  std::vector<double> S(P * N), k_prev(R * N), v_prev(R * P);
  for (int64_t bh = 0; bh < B * H; ++bh) {
    // A fresh sequence starts from zero state and no previous step.
    for (int64_t i = 0; i < P * N; ++i) S[i] = carried ? a.ssm.data<T>()[bh * P * N + i] : 0.0;
    for (int64_t i = 0; i < R * N; ++i)
      k_prev[i] = carried ? a.k_prev.data<T>()[bh * R * N + i] : 0.0;
    for (int64_t i = 0; i < R * P; ++i)
      v_prev[i] = carried ? a.v_prev.data<T>()[bh * R * P + i] : 0.0;
    const double Dh = D ? static_cast<double>(D[bh % H]) : 0.0;
    for (int64_t t = 0; t < L; ++t) {
      const int64_t step = bh * L + t;
      const double alpha = std::exp(static_cast<double>(A[step]) * dt[step]);
      const double beta = (1 - static_cast<double>(lam[step])) * dt[step] * alpha;
      const double gamma = static_cast<double>(lam[step]) * dt[step];
      const T *kt = k + step * R * N, *vt = v + step * R * P, *qt = q + step * R * N;
      // S_t = alpha S_{t-1} + beta sum_r v_{t-1,r} k_{t-1,r}^T + gamma sum_r v_t,r k_t,r^T
      for (int64_t p = 0; p < P; ++p)
        for (int64_t n = 0; n < N; ++n) {
          double u = 0;
          for (int64_t r = 0; r < R; ++r)
            u += beta * v_prev[r * P + p] * k_prev[r * N + n] +
                 gamma * static_cast<double>(vt[r * P + p]) * kt[r * N + n];
          S[p * N + n] = alpha * S[p * N + n] + u;
        }
      // o_t,r = S_t q_t,r + D v_t,r
      for (int64_t r = 0; r < R; ++r)
        for (int64_t p = 0; p < P; ++p) {
          double acc = Dh * vt[r * P + p];
          for (int64_t n = 0; n < N; ++n) acc += S[p * N + n] * qt[r * N + n];
          o[(step * R + r) * P + p] = static_cast<T>(acc);
        }
      for (int64_t i = 0; i < R * N; ++i) k_prev[i] = kt[i];
      for (int64_t i = 0; i < R * P; ++i) v_prev[i] = vt[i];
    }
    if (!carried) continue;
    for (int64_t i = 0; i < P * N; ++i) out<T>(a.ssm)[bh * P * N + i] = static_cast<T>(S[i]);
    for (int64_t i = 0; i < R * N; ++i)
      out<T>(a.k_prev)[bh * R * N + i] = static_cast<T>(k_prev[i]);
    for (int64_t i = 0; i < R * P; ++i)
      out<T>(a.v_prev)[bh * R * P + i] = static_cast<T>(v_prev[i]);
  }
}

template void mamba3_scan<float>(const ops::Mamba3ScanArgs&);
template void mamba3_scan<double>(const ops::Mamba3ScanArgs&);

}  // namespace ssm::ref
